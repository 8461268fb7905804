package process_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"weft.dev/weft/process"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
)

func benchSetup(b *testing.B) *fixture {
	b.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "weft.db")})
	if err != nil {
		b.Fatal(err)
	}
	return setupTB(b, process.Config{Store: st})
}

// BenchmarkStart measures Start → process.started committed (SQLite).
func BenchmarkStart(b *testing.B) {
	f := benchSetup(b)
	var ids []string
	b.ReportAllocs()
	for b.Loop() {
		p, err := f.m.Start(context.Background(), process.StartParams{SessionID: "s1", Kind: record.ProcessShell,
			Command: "exit 0", Binding: f.b, Disposition: record.OwnerBound})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	b.StopTimer()
	for _, id := range ids {
		f.m.Await(context.Background(), id, time.Minute, owner)
	}
}

// BenchmarkOutputThroughput measures output captured into the SQLite log
// from a process writing 64 MiB as fast as it can: text (yes) and binary
// zeros (stored as base64).
func BenchmarkOutputThroughput(b *testing.B) {
	b.Run("text", func(b *testing.B) { benchOutput(b, "yes | head -c 67108864") })
	b.Run("zeros", func(b *testing.B) { benchOutput(b, "head -c 67108864 /dev/zero") })
}

func benchOutput(b *testing.B, command string) {
	f := benchSetup(b)
	const n = 64 << 20
	b.SetBytes(n)
	for b.Loop() {
		p, err := f.m.Start(context.Background(), process.StartParams{SessionID: "s1", Kind: record.ProcessShell,
			Command: command, Binding: f.b, Disposition: record.OwnerBound})
		if err != nil {
			b.Fatal(err)
		}
		res, err := f.m.Await(context.Background(), p.ID, 5*time.Minute, owner)
		if err != nil || res.Process.OutputBytes != n {
			b.Fatalf("await = %+v, %v", res.Process, err)
		}
	}
}

// BenchmarkConcurrent100 starts 100 background `sleep 1` and reaps them;
// it reports the time to start all and to reap all, and the host memory
// per running process.
func BenchmarkConcurrent100(b *testing.B) {
	f := benchSetup(b)
	var startMS, reapMS, memPer float64
	for b.Loop() {
		runtime.GC()
		var before, during runtime.MemStats
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		ids := make([]string, 100)
		for i := range ids {
			p, err := f.m.Start(context.Background(), process.StartParams{SessionID: "s1", Kind: record.ProcessShell,
				Command: "sleep 1", Binding: f.b, Disposition: record.OwnerBound})
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = p.ID
		}
		started := time.Since(t0)
		runtime.GC()
		runtime.ReadMemStats(&during)
		for _, id := range ids {
			if _, err := f.m.Await(context.Background(), id, time.Minute, owner); err != nil {
				b.Fatal(err)
			}
		}
		startMS += float64(started.Milliseconds())
		reapMS += float64(time.Since(t0).Milliseconds())
		memPer += (float64(during.HeapAlloc) - float64(before.HeapAlloc) + float64(during.StackInuse) - float64(before.StackInuse)) / 100
	}
	n := float64(b.N)
	b.ReportMetric(startMS/n, "start-all-ms")
	b.ReportMetric(reapMS/n, "reap-all-ms")
	b.ReportMetric(memPer/n, "bytes/process")
}
