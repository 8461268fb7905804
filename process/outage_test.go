package process_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/storetest"
)

// errDown is what a store says while it refuses writes.
var errDown = fmt.Errorf("store down: %w", syscall.EIO)

// numbered prints lines n1…nLast, stopping after each line in gates until
// the file of that name exists in its working directory, then FAILED-BUILD
// on stderr, and exits 3.
func numbered(last int, gates map[int]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `i=1; while [ $i -le %d ]; do echo n$i; case $i in`, last)
	for _, n := range slices.Sorted(maps.Keys(gates)) {
		fmt.Fprintf(&b, ` %d) while [ ! -e %s ]; do sleep 0.01; done;;`, n, gates[n])
	}
	b.WriteString(` esac; i=$((i+1)); done; echo FAILED-BUILD >&2; exit 3`)
	return b.String()
}

// lineEnd is the offset after line n of numbered's output.
func lineEnd(n int) int64 {
	var off int64
	for i := 1; i <= n; i++ {
		off += int64(len(fmt.Sprintf("n%d\n", i)))
	}
	return off
}

func (f *fixture) open(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitRefused waits until the store refused output of process id up to
// offset end.
func waitRefused(t *testing.T, fst *storetest.Faulty, id string, end int64) {
	t.Helper()
	proctest.Eventually(t, 10*time.Second, func() string {
		return fmt.Sprintf("the store was never offered output up to %d: %+v", end, fst.RefusedProcess(id))
	}, func() bool { return fst.RefusedProcess(id).OutputEnd >= end })
}

// TestOutputThroughStoreOutage: a process prints numbered lines while the
// store refuses writes for a while. Afterwards every line is in the log,
// at its exact offset, and the process's end is recorded.
func TestOutputThroughStoreOutage(t *testing.T) {
	fst := &storetest.Faulty{Store: memory.New()}
	f := setup(t, process.Config{Store: fst})
	p := f.shell(t, numbered(60, map[int]string{9: "go1", 41: "go2"}))
	f.waitOutput(t, p.ID, "n9\n")
	fst.Fail(errDown)
	f.open(t, "go1")
	waitRefused(t, fst, p.ID, lineEnd(41))
	fst.Fail(nil)
	f.open(t, "go2")
	res := f.await(t, p.ID)
	if res.Process.Status != record.ProcessFailed || res.Process.ExitCode == nil || *res.Process.ExitCode != 3 {
		t.Fatalf("record = %+v", res.Process)
	}
	want := lineEnd(60) + int64(len("FAILED-BUILD\n"))
	if res.Process.OutputBytes != want || res.Process.DroppedBytes != 0 {
		t.Errorf("outputBytes = %d, droppedBytes = %d; want %d, 0", res.Process.OutputBytes, res.Process.DroppedBytes, want)
	}
	out, err := f.m.Output(context.Background(), p.ID, 0, 1<<20, owner)
	if err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&lines, "n%d\n", i)
	}
	streams := map[string]string{}
	for _, c := range out.Chunks {
		streams[c.Stream] += string(c.Data)
	}
	if streams["stdout"] != lines.String() || streams["stderr"] != "FAILED-BUILD\n" || out.Next != want || !out.Ended {
		t.Errorf("output = %q (next %d, ended %v)", streams, out.Next, out.Ended)
	}
}

// ended records the processes a Notifier heard of and whether each was
// committed as ended when it did.
type ended struct {
	st store.Store
	mu sync.Mutex
	ps []record.Process
}

func (e *ended) ProcessEnded(p record.Process) {
	rec, err := e.st.Process(context.Background(), p.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil || !record.IsProcessTerminal(rec.Status) {
		p.Status = "notified before its end was committed"
	}
	e.ps = append(e.ps, p)
}

func (e *ended) list() []record.Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ps)
}

// TestEndWrittenAfterOutage: a process that ends while the store refuses
// writes is not lost: its last output and its terminal event are written
// when the store takes writes again, and only then is the end announced.
func TestEndWrittenAfterOutage(t *testing.T) {
	fst := &storetest.Faulty{Store: memory.New()}
	notes := &ended{st: fst}
	f := setup(t, process.Config{Store: fst, Notify: notes})
	p := f.shell(t, numbered(5, map[int]string{2: "go"}))
	f.waitOutput(t, p.ID, "n2\n")
	fst.Fail(errDown)
	f.open(t, "go")
	proctest.Eventually(t, 10*time.Second, func() string {
		return fmt.Sprintf("the end was never offered to the store: %+v", fst.RefusedProcess(p.ID))
	}, func() bool { return slices.Contains(fst.RefusedProcess(p.ID).Types, process.EventFailed) })
	if got := notes.list(); len(got) != 0 {
		t.Fatalf("the end was announced while the store refused it: %+v", got)
	}
	if res, err := f.m.Await(context.Background(), p.ID, 0, owner); err != nil || !res.TimedOut {
		t.Fatalf("await during the outage = %+v, %v; want still running (nothing committed)", res, err)
	}
	fst.Fail(nil)
	res := f.await(t, p.ID)
	if res.Process.Status != record.ProcessFailed || res.Process.ExitCode == nil || *res.Process.ExitCode != 3 || !strings.Contains(res.Tail, "n5\n") || !strings.Contains(res.Tail, "FAILED-BUILD\n") {
		t.Fatalf("after the outage: %+v, tail %q", res.Process, res.Tail)
	}
	evs := f.log(t, p.ID)
	if last := evs[len(evs)-1]; last.Type != process.EventFailed {
		t.Errorf("log ends with %s", last.Type)
	}
	proctest.Eventually(t, 5*time.Second, func() string { return fmt.Sprintf("notified %+v", notes.list()) }, func() bool { return len(notes.list()) == 1 })
	if got := notes.list(); got[0].Status != record.ProcessFailed {
		t.Errorf("notified %+v", got[0])
	}
}

// TestOutputLostInOutageIsMarked: with a small bound on held output, an
// outage loses output; the loss is a marked range at its exact offsets,
// counted in droppedBytes and lostBytes, and every reader shows it where
// the output was lost.
func TestOutputLostInOutageIsMarked(t *testing.T) {
	fst := &storetest.Faulty{Store: memory.New()}
	f := setup(t, process.Config{Store: fst, ChunkBytes: 64, OutageBuffer: 512})
	p := f.shell(t, numbered(60, map[int]string{9: "go1", 41: "go2"}))
	f.waitOutput(t, p.ID, "n9\n")
	fst.Fail(errDown)
	f.open(t, "go1")
	waitRefused(t, fst, p.ID, lineEnd(41))
	fst.Fail(nil)
	// What was held is written at the next retry.
	proctest.Eventually(t, 10*time.Second, func() string { return "held output never written" }, func() bool {
		rec, err := fst.Process(context.Background(), p.ID)
		return err == nil && rec.OutputBytes >= lineEnd(41)
	})
	f.open(t, "go2")
	res := f.await(t, p.ID)
	rec := res.Process
	if want := lineEnd(60) + int64(len("FAILED-BUILD\n")); rec.OutputBytes != want || *rec.ExitCode != 3 {
		t.Fatalf("record = %+v; want %d output bytes, exit code 3", rec, want)
	}
	out, err := f.m.Output(context.Background(), p.ID, 0, 1<<20, owner)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 1; i <= 41; i++ {
		fmt.Fprintf(&want, "n%d\n", i)
	}
	outage := want.String() // the bytes [0, lineEnd(41)) are stdout only
	var lost []api.Chunk
	var lostBytes, next int64
	for _, c := range out.Chunks {
		if c.Offset != next {
			t.Fatalf("chunk at %d after %d: offsets are not contiguous: %+v", c.Offset, next, out.Chunks)
		}
		next = c.End()
		if c.Lost > 0 {
			lost, lostBytes = append(lost, c), lostBytes+c.Lost
			if c.Reason != api.LostStoreUnavailable || len(c.Data) != 0 || c.End() > lineEnd(41) || c.Offset < lineEnd(9) {
				t.Errorf("lost range %+v; want within the outage [%d, %d), store_unavailable", c, lineEnd(9), lineEnd(41))
			}
			continue
		}
		if c.Offset < int64(len(outage)) && string(c.Data) != outage[c.Offset:min(c.End(), int64(len(outage)))] && c.End() <= int64(len(outage)) {
			t.Errorf("chunk at %d = %q; want %q", c.Offset, c.Data, outage[c.Offset:c.End()])
		}
	}
	if next != rec.OutputBytes || len(lost) != 1 {
		t.Fatalf("read to %d of %d with lost ranges %+v; want one", next, rec.OutputBytes, lost)
	}
	if lostBytes != rec.LostBytes || lostBytes != rec.DroppedBytes || lostBytes != out.Lost || int64(len(out.Data))+out.Lost != out.Next-out.Offset {
		t.Errorf("lost %d bytes; record lostBytes %d, droppedBytes %d; read lost %d, data %d of [%d, %d)",
			lostBytes, rec.LostBytes, rec.DroppedBytes, out.Lost, len(out.Data), out.Offset, out.Next)
	}
	// Every line is read whole or lies in the lost range.
	g := lost[0]
	for i := 1; i <= 41; i++ {
		start, end := lineEnd(i-1), lineEnd(i)
		line := fmt.Sprintf("n%d\n", i)
		if end > g.Offset && start < g.End() {
			continue
		}
		if !strings.Contains(string(out.Data), line) {
			t.Errorf("line %q is neither read nor lost", line)
		}
	}
	note := fmt.Sprintf("[%d bytes lost at offset %d: store unavailable]", g.Lost, g.Offset)
	if g.LostNote() != note {
		t.Errorf("note = %q; want %q", g.LostNote(), note)
	}
	// Follow yields the mark in its place.
	var followed []api.Chunk
	for c, err := range f.m.Follow(context.Background(), p.ID, 0, owner) {
		if err != nil {
			t.Fatal(err)
		}
		followed = append(followed, c)
	}
	if !slices.ContainsFunc(followed, func(c api.Chunk) bool { return c.Lost == g.Lost && c.Offset == g.Offset }) || followed[len(followed)-1].End() != rec.OutputBytes {
		t.Errorf("follow = %+v", followed)
	}
	// So do the model's tools and Await.
	h := map[string]any{"__handle__": "process", "id": p.ID}
	if r := callTool(t, f, "process_output", "c1", map[string]any{"handle": h}, owner); r.IsError || !strings.Contains(r.Output, "n9\n"+note+"\n") {
		t.Errorf("process_output = %s", r.Output)
	}
	if !strings.Contains(res.Tail, note) {
		t.Errorf("await tail = %q", res.Tail)
	}
	if r := callTool(t, f, "process_await", "c2", map[string]any{"handle": h}, owner); r.IsError || !strings.Contains(r.Output, `"lostBytes": `+fmt.Sprint(g.Lost)) {
		t.Errorf("process_await = %s", r.Output)
	}
}

// TestToolEndWrittenAfterOutage: the result and end of a tool process that
// ends during an outage are written when the store is back, output beyond
// the bound as one marked lost range; only then is the end announced.
func TestToolEndWrittenAfterOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fst := &storetest.Faulty{Store: memory.New()}
		notes := &ended{st: fst}
		f := setup(t, process.Config{Store: fst, Notify: notes, ChunkBytes: 64, OutageBuffer: 1024})
		ctx := context.Background()
		text := strings.Repeat("0123456789", 100) // 1,000 bytes: "echo:" + text is 1,005
		p, err := f.m.Start(ctx, process.StartParams{SessionID: "s1", RunID: "r1", Kind: record.ProcessTool, Tool: "echo",
			Args: []byte(fmt.Sprintf(`{"text":%q,"sleepMs":100}`, text)), Disposition: record.OwnerBound})
		if err != nil {
			t.Fatal(err)
		}
		fst.Fail(errDown)
		time.Sleep(3 * time.Second) // the tool ends; its writes are refused, again and again
		synctest.Wait()
		if r := fst.RefusedProcess(p.ID); !slices.Contains(r.Types, process.EventCompleted) || r.Batches < 3 {
			t.Fatalf("refused %+v; want the end offered, and retried", r)
		}
		if got := notes.list(); len(got) != 0 {
			t.Fatalf("announced during the outage: %+v", got)
		}
		fst.Fail(nil)
		time.Sleep(2 * time.Second) // the longest backoff
		synctest.Wait()
		rec, err := f.st.Process(ctx, p.ID)
		if err != nil || rec.Status != record.ProcessCompleted || rec.OutputBytes != 1005 {
			t.Fatalf("after the outage: %+v, %v", rec, err)
		}
		out, err := f.m.Output(ctx, p.ID, 0, 1<<20, owner)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Chunks) == 0 || out.Chunks[0].Lost == 0 || out.Chunks[0].Offset != 0 {
			t.Fatalf("chunks = %+v; want a lost range first", out.Chunks)
		}
		full := "echo:" + text
		if lost := out.Chunks[0].Lost; string(out.Data) != full[lost:] || rec.LostBytes != lost || rec.DroppedBytes != lost || out.Next != 1005 {
			t.Errorf("lost %d; data %q; record %+v", lost, out.Data, rec)
		}
		if got := notes.list(); len(got) != 1 || got[0].Status != record.ProcessCompleted {
			t.Errorf("notified %+v", got)
		}
	})
}

// TestCloseDuringOutage: Close does not wait for a store that never comes
// back; the process stays running in the store, unannounced, for the next
// host's Recover.
func TestCloseDuringOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fst := &storetest.Faulty{Store: memory.New()}
		notes := &ended{st: fst}
		f := setup(t, process.Config{Store: fst, Notify: notes})
		ctx := context.Background()
		p, err := f.m.Start(ctx, process.StartParams{SessionID: "s1", RunID: "r1", Kind: record.ProcessTool, Tool: "echo",
			Args: []byte(`{"text":"x","sleepMs":10}`), Disposition: record.OwnerBound})
		if err != nil {
			t.Fatal(err)
		}
		fst.Fail(errDown)
		time.Sleep(time.Second)
		synctest.Wait()
		f.m.Close()
		if rec, err := f.st.Process(ctx, p.ID); err != nil || rec.Status != record.ProcessRunning {
			t.Errorf("after Close: %+v, %v", rec, err)
		}
		if got := notes.list(); len(got) != 0 {
			t.Errorf("announced an end that was not written: %+v", got)
		}
	})
}

// TestNoisyFailingProcess: the model's view of a background process that
// printed far more than it is shown keeps the beginning, the end, the
// exit code and the true size, and says how to read the rest.
func TestNoisyFailingProcess(t *testing.T) {
	f := setup(t, process.Config{})
	p := f.shell(t, "seq 1 200000; echo FAILED-BUILD >&2; exit 3")
	res := f.await(t, p.ID)
	total := int64(len("FAILED-BUILD\n"))
	for i := 1; i <= 200000; i++ {
		total += int64(len(fmt.Sprint(i)) + 1)
	}
	if res.Process.OutputBytes != total || *res.Process.ExitCode != 3 {
		t.Fatalf("record = %+v; want %d bytes, exit code 3", res.Process, total)
	}
	// stdout and stderr are two pipes, read as they come: the last line
	// of the output is the last of one of them.
	if !strings.HasPrefix(res.Head, "1\n2\n3\n") || !strings.HasSuffix(res.Tail, "200000\n") && !strings.HasSuffix(res.Tail, "FAILED-BUILD\n") ||
		res.TailOffset+int64(len(res.Tail)) != total || res.Omitted != res.TailOffset-int64(len(res.Head)) || len(res.Head)+len(res.Tail) > 4<<10 {
		t.Errorf("await: head %d bytes %q…, omitted %d, tail at %d: …%q", len(res.Head), res.Head[:min(len(res.Head), 20)], res.Omitted, res.TailOffset, res.Tail[max(0, len(res.Tail)-40):])
	}
	h := map[string]any{"__handle__": "process", "id": p.ID}
	r := callTool(t, f, "process_await", "c1", map[string]any{"handle": h}, owner)
	for _, want := range []string{`"exitCode": 3`, fmt.Sprintf(`"outputBytes": %d`, total), `"head": "1\n2\n3\n`,
		fmt.Sprintf("%d bytes omitted between head and tail", res.Omitted), fmt.Sprintf("read them with process_output from offset %d", len(res.Head))} {
		if !strings.Contains(r.Output, want) {
			t.Errorf("process_await lacks %q:\n%s", want, r.Output)
		}
	}
	r = callTool(t, f, "process_output", "c2", map[string]any{"handle": h}, owner)
	for _, want := range []string{fmt.Sprintf("[bytes 0..32768 of %d; %d more bytes: read on from offset 32768, or the last ones from offset %d; the process has ended: failed, exit code 3]", total, total-32768, total-32768)} {
		if !strings.Contains(r.Output, want) {
			t.Errorf("process_output lacks %q:\n…%s", want, r.Output[max(0, len(r.Output)-300):])
		}
	}
}

// TestEndCommittedButReportedFailed: a write the store committed but
// reported failed (a connection lost after the commit) is not written
// twice: the next try finds its seqs taken, and the process catches up
// with the stored record.
func TestEndCommittedButReportedFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fst := &storetest.Faulty{Store: memory.New()}
		notes := &ended{st: fst}
		f := setup(t, process.Config{Store: fst, Notify: notes})
		ctx := context.Background()
		p, err := f.m.Start(ctx, process.StartParams{SessionID: "s1", RunID: "r1", Kind: record.ProcessTool, Tool: "echo",
			Args: []byte(`{"text":"x","sleepMs":100}`), Disposition: record.OwnerBound})
		if err != nil {
			t.Fatal(err)
		}
		fst.FailProcessAfterCommit(1, errDown)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := types(f.log(t, p.ID)); !slices.Equal(got, []string{"process.started", "process.output", "process.completed"}) {
			t.Errorf("log = %v", got)
		}
		if got := notes.list(); len(got) != 1 || got[0].Status != record.ProcessCompleted {
			t.Errorf("notified %+v", got)
		}
	})
}
