package process

import (
	"bytes"
	"testing"
	"time"

	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

// BenchmarkOutputAppend measures the hot path of output capture without a
// process or a disk: one writeOutput of a 16 KiB piece (one chunk), its
// batch and record, into the memory store; the cap trims as it goes.
func BenchmarkOutputAppend(b *testing.B) {
	st := memory.New()
	defer st.Close()
	m, err := New(Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	rec := record.Process{ID: "p", SessionID: "s", Kind: record.ProcessTool, Status: record.ProcessRunning, Disposition: record.OwnerBound, StartedAt: time.Now()}
	p := newBenchProc(m, rec)
	if err := p.append(b.Context(), []record.ProcessEvent{newEvent(EventStarted, StartedData{})}, nil); err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcde\n"), 1<<10)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		p.writeOutput(Stdout, data)
	}
	if p.rec.OutputBytes != int64(b.N)*int64(len(data)) {
		b.Fatalf("output bytes %d after %d writes", p.rec.OutputBytes, b.N)
	}
}

func newBenchProc(m *Manager, rec record.Process) *proc { return m.newProc(rec) }
