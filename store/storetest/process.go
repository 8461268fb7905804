package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// procOwner plays the process manager: it sequences a process's events.
type procOwner struct {
	rec   record.Process
	clock time.Time
}

func newProc(id, sessionID, mountID string, started time.Time) *procOwner {
	return &procOwner{clock: started, rec: record.Process{
		ID: id, SessionID: sessionID, Kind: record.ProcessShell, Status: record.ProcessRunning,
		Disposition: record.OwnerBound, MountID: mountID, StartedAt: started,
		Spec: record.ProcessSpec{Command: "echo hi", Mount: mountID, Env: map[string]string{"A": "1"}},
	}}
}

func (p *procOwner) ev(t testing.TB, typ event.Type, data any) record.ProcessEvent {
	t.Helper()
	e, err := event.New("", typ, data)
	if err != nil {
		t.Fatal(err)
	}
	p.clock = p.clock.Add(time.Millisecond + 3)
	p.rec.LastSeq++
	return record.ProcessEvent{Seq: p.rec.LastSeq, ProcessID: p.rec.ID, Type: typ, Time: p.clock, Data: e.Data}
}

// output returns an output chunk of n bytes.
func (p *procOwner) output(t testing.TB, n int) record.ProcessEvent {
	t.Helper()
	e := p.ev(t, "process.output", map[string]any{"offset": p.rec.OutputBytes, "text": fmt.Sprintf("%0*d", n, 0)})
	e.Offset, e.Size = p.rec.OutputBytes, int64(n)
	p.rec.OutputBytes += int64(n)
	return e
}

func (p *procOwner) batch(evs ...record.ProcessEvent) store.ProcessBatch {
	r := p.rec
	r.Grants = slices.Clone(r.Grants)
	return store.ProcessBatch{ProcessID: r.ID, Events: evs, Record: &r}
}

func mustAppendProcess(t testing.TB, s store.Store, b store.ProcessBatch) {
	t.Helper()
	if err := s.AppendProcess(context.Background(), b); err != nil {
		t.Fatalf("AppendProcess %s seq %d: %v", b.ProcessID, b.Events[0].Seq, err)
	}
}

func procSeqs(evs []record.ProcessEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func testProcessLog(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := newProc("p1", "s1", "work", t0)
	started := p.ev(t, "process.started", map[string]int{"pid": 1})
	mustAppendProcess(t, s, p.batch(started))
	out1, out2 := p.output(t, 10), p.output(t, 5)
	mustAppendProcess(t, s, store.ProcessBatch{ProcessID: "p1", Events: []record.ProcessEvent{out1, out2}})

	got, err := s.ReadProcess(ctx, store.ReadProcessParams{ProcessID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []record.ProcessEvent{started, out1, out2}
	for i := range want {
		want[i].Time = want[i].Time.UTC()
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ReadProcess (-want +got):\n%s", d)
	}
	got, err = s.ReadProcess(ctx, store.ReadProcessParams{ProcessID: "p1", After: 1, Limit: 1})
	if err != nil || !slices.Equal(procSeqs(got), []int64{2}) {
		t.Errorf("ReadProcess after 1 limit 1 = %v, %v; want [2]", procSeqs(got), err)
	}
	got, err = s.ReadProcess(ctx, store.ReadProcessParams{ProcessID: "p1", Types: []event.Type{"process.started"}})
	if err != nil || !slices.Equal(procSeqs(got), []int64{1}) {
		t.Errorf("ReadProcess by type = %v, %v; want [1]", procSeqs(got), err)
	}
	got, err = s.ReadProcess(ctx, store.ReadProcessParams{ProcessID: "p1", After: 3})
	if err != nil || len(got) != 0 {
		t.Errorf("ReadProcess at end = %v, %v; want empty", got, err)
	}

	// The seq must continue the log exactly.
	for _, seq := range []int64{1, 3, 5} {
		e := record.ProcessEvent{Seq: seq, ProcessID: "p1", Type: "signal.x", Time: t0}
		if err := s.AppendProcess(ctx, store.ProcessBatch{ProcessID: "p1", Events: []record.ProcessEvent{e}}); !errors.Is(err, store.ErrSeqConflict) {
			t.Errorf("append seq %d after 3 = %v; want ErrSeqConflict", seq, err)
		}
	}
	gap := []record.ProcessEvent{{Seq: 4, ProcessID: "p1", Type: "a", Time: t0}, {Seq: 6, ProcessID: "p1", Type: "b", Time: t0}}
	if err := s.AppendProcess(ctx, store.ProcessBatch{ProcessID: "p1", Events: gap}); !errors.Is(err, store.ErrSeqConflict) {
		t.Errorf("append with a gap = %v; want ErrSeqConflict", err)
	}
	// Nothing of a rejected batch is written.
	if got, _ := s.ReadProcess(ctx, store.ReadProcessParams{ProcessID: "p1"}); len(got) != 3 {
		t.Errorf("after rejected appends: %d events; want 3", len(got))
	}

	invalid := map[string]store.ProcessBatch{
		"no events":          {ProcessID: "p1"},
		"no id":              {Events: []record.ProcessEvent{{Seq: 4, Type: "a", Time: t0}}},
		"other process":      {ProcessID: "p1", Events: []record.ProcessEvent{{Seq: 4, ProcessID: "p2", Type: "a", Time: t0}}},
		"no type":            {ProcessID: "p1", Events: []record.ProcessEvent{{Seq: 4, ProcessID: "p1", Time: t0}}},
		"bad json":           {ProcessID: "p1", Events: []record.ProcessEvent{{Seq: 4, ProcessID: "p1", Type: "a", Time: t0, Data: []byte("{")}}},
		"record of another":  {ProcessID: "p1", Events: []record.ProcessEvent{{Seq: 4, ProcessID: "p1", Type: "a", Time: t0}}, Record: &record.Process{ID: "p2", SessionID: "s1"}},
		"new without record": {ProcessID: "p9", Events: []record.ProcessEvent{{Seq: 1, ProcessID: "p9", Type: "a", Time: t0}}},
	}
	for name, b := range invalid {
		if err := s.AppendProcess(ctx, b); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: AppendProcess = %v; want ErrInvalid", name, err)
		}
	}
	if _, err := s.ReadProcess(ctx, store.ReadProcessParams{ProcessID: "p9"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReadProcess unknown = %v; want ErrNotFound", err)
	}
	if _, err := s.ProcessOutput(ctx, store.ProcessOutputParams{ProcessID: "p9"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ProcessOutput unknown = %v; want ErrNotFound", err)
	}
	if _, err := s.Process(ctx, "p9"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Process unknown = %v; want ErrNotFound", err)
	}
	// Process logs and session logs are separate.
	if _, err := s.LastSeq(ctx, "p1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LastSeq of a process ID = %v; want ErrNotFound", err)
	}
}

func testProcessConcurrent(t *testing.T, s store.Store) {
	// Many processes appended concurrently each keep a gap-free log.
	const procs, batches = 8, 20
	errs := make(chan error, procs)
	for i := range procs {
		go func() {
			p := newProc(fmt.Sprintf("p%d", i), "s1", "", t0)
			for j := range batches {
				b := p.batch(p.output(t, 3), p.ev(t, "signal.tick", map[string]int{"j": j}))
				if err := s.AppendProcess(context.Background(), b); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range procs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range procs {
		got, err := s.ReadProcess(context.Background(), store.ReadProcessParams{ProcessID: fmt.Sprintf("p%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		for k, e := range got {
			if e.Seq != int64(k+1) {
				t.Fatalf("p%d: event %d has seq %d", i, k, e.Seq)
			}
		}
		if len(got) != 2*batches {
			t.Errorf("p%d: %d events; want %d", i, len(got), 2*batches)
		}
	}
}

func testProcessRecords(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newProc("a", "s1", "work", t0.Add(2*time.Second))
	b := newProc("b", "s1", "other", t0.Add(time.Second))
	c := newProc("c", "s2", "work", t0.Add(3*time.Second))
	for _, p := range []*procOwner{a, b, c} {
		mustAppendProcess(t, s, p.batch(p.ev(t, "process.started", nil)))
	}
	// Upsert: the record follows the last batch that carries one.
	code := 3
	end := t0.Add(time.Hour).In(zone)
	b.rec.Status, b.rec.ExitCode, b.rec.EndedAt = record.ProcessFailed, &code, &end
	b.rec.Grants = []string{"s2"}
	mustAppendProcess(t, s, b.batch(b.ev(t, "process.failed", map[string]int{"exitCode": 3})))
	got, err := s.Process(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	want := b.rec
	want.StartedAt = want.StartedAt.UTC()
	endUTC := end.UTC()
	want.EndedAt = &endUTC
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Process after upsert (-want +got):\n%s", d)
	}
	// A batch without a record keeps it.
	mustAppendProcess(t, s, store.ProcessBatch{ProcessID: "b", Events: []record.ProcessEvent{b.ev(t, "process.access_denied", nil)}})
	if got2, err := s.Process(ctx, "b"); err != nil || got2.Status != record.ProcessFailed {
		t.Errorf("Process after record-less batch = %+v, %v", got2, err)
	}

	list := func(p store.ListProcessesParams) []string {
		t.Helper()
		ps, err := s.Processes(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, p := range ps {
			ids = append(ids, p.ID)
		}
		return ids
	}
	for _, tc := range []struct {
		name string
		p    store.ListProcessesParams
		want []string
	}{
		{"all", store.ListProcessesParams{}, []string{"b", "a", "c"}},
		{"session", store.ListProcessesParams{SessionID: "s1"}, []string{"b", "a"}},
		{"granted", store.ListProcessesParams{SessionID: "s2", IncludeGranted: true}, []string{"b", "c"}},
		{"not granted", store.ListProcessesParams{SessionID: "s2"}, []string{"c"}},
		{"running", store.ListProcessesParams{Statuses: []string{record.ProcessRunning}}, []string{"a", "c"}},
		{"statuses", store.ListProcessesParams{Statuses: []string{record.ProcessFailed, record.ProcessCompleted}}, []string{"b"}},
		{"mount", store.ListProcessesParams{MountID: "work"}, []string{"a", "c"}},
		{"session mount running", store.ListProcessesParams{SessionID: "s1", MountID: "work", Statuses: []string{record.ProcessRunning}}, []string{"a"}},
		{"limit", store.ListProcessesParams{Limit: 1}, []string{"b"}},
		{"unknown", store.ListProcessesParams{SessionID: "nope"}, []string{}},
	} {
		if got := list(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Processes = %v; want %v", tc.name, got, tc.want)
		}
	}
}

func testProcessOutputTrim(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := newProc("p", "s1", "", t0)
	mustAppendProcess(t, s, p.batch(p.ev(t, "process.started", nil)))
	for range 5 {
		mustAppendProcess(t, s, p.batch(p.output(t, 10), p.ev(t, "signal.x", nil))) // chunks at 0,10,20,30,40
	}
	offsets := func(evs []record.ProcessEvent) []int64 {
		out := []int64{}
		for _, e := range evs {
			out = append(out, e.Offset)
		}
		return out
	}
	for _, tc := range []struct {
		off   int64
		limit int
		want  []int64
	}{
		{0, 0, []int64{0, 10, 20, 30, 40}},
		{9, 0, []int64{0, 10, 20, 30, 40}},
		{10, 2, []int64{10, 20}},
		{45, 0, []int64{40}},
		{50, 0, []int64{}},
	} {
		got, err := s.ProcessOutput(ctx, store.ProcessOutputParams{ProcessID: "p", Offset: tc.off, Limit: tc.limit})
		if err != nil || !slices.Equal(offsets(got), tc.want) {
			t.Errorf("ProcessOutput(%d, %d) = %v, %v; want %v", tc.off, tc.limit, offsets(got), err, tc.want)
		}
	}
	// Drop the chunks that end at or before 25: [0,10) and [10,20).
	p.rec.DroppedBytes = 25
	b := p.batch(p.output(t, 10), p.ev(t, "process.output_dropped", map[string]int{"before": 25}))
	b.DropOutputBefore = 25
	mustAppendProcess(t, s, b)
	got, err := s.ProcessOutput(ctx, store.ProcessOutputParams{ProcessID: "p"})
	if err != nil || !slices.Equal(offsets(got), []int64{20, 30, 40, 50}) {
		t.Errorf("ProcessOutput after drop = %v, %v; want [20 30 40 50]", offsets(got), err)
	}
	all, err := s.ReadProcess(ctx, store.ReadProcessParams{ProcessID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	// seqs: 1 started, 2/3, 4/5, ... output at even seqs 2,4 dropped.
	if want := []int64{1, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13}; !slices.Equal(procSeqs(all), want) {
		t.Errorf("ReadProcess after drop = %v; want %v", procSeqs(all), want)
	}
	// The log still continues from its last seq.
	mustAppendProcess(t, s, store.ProcessBatch{ProcessID: "p", Events: []record.ProcessEvent{p.ev(t, "process.completed", nil)}})
	if rec, err := s.Process(ctx, "p"); err != nil || rec.DroppedBytes != 25 || rec.OutputBytes != 60 {
		t.Errorf("record after drop = %+v, %v", rec, err)
	}
}

// testProcessOutputLost: a range of output the writer could not store is
// an event with a range of its own (process.output_lost); the store reads
// it in offset order among the chunks, whatever its type, trims it like
// them, and keeps the record's accounting of it.
func testProcessOutputLost(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := newProc("p", "s1", "", t0)
	mustAppendProcess(t, s, p.batch(p.ev(t, "process.started", nil), p.output(t, 10))) // [0,10)
	lost := p.ev(t, "process.output_lost", map[string]any{"offset": 10, "bytes": 25, "reason": "store_unavailable"})
	lost.Offset, lost.Size = 10, 25 // [10,35)
	p.rec.OutputBytes += 25
	p.rec.LostBytes, p.rec.DroppedBytes = 25, 25
	mustAppendProcess(t, s, p.batch(lost, p.output(t, 10))) // [35,45)
	for _, tc := range []struct {
		off   int64
		types []event.Type
	}{
		{0, []event.Type{"process.output", "process.output_lost", "process.output"}},
		{12, []event.Type{"process.output_lost", "process.output"}},
		{35, []event.Type{"process.output"}},
	} {
		got, err := s.ProcessOutput(ctx, store.ProcessOutputParams{ProcessID: "p", Offset: tc.off})
		var types []event.Type
		for _, e := range got {
			types = append(types, e.Type)
		}
		if err != nil || !slices.Equal(types, tc.types) {
			t.Errorf("ProcessOutput(%d) = %v, %v; want %v", tc.off, types, err, tc.types)
		}
	}
	if got, err := s.ProcessOutput(ctx, store.ProcessOutputParams{ProcessID: "p", Offset: 12}); err == nil && len(got) > 0 {
		if e := got[0]; e.Offset != 10 || e.Size != 25 || e.Seq != lost.Seq {
			t.Errorf("lost range read back as %+v", e)
		}
	}
	if rec, err := s.Process(ctx, "p"); err != nil || rec.LostBytes != 25 || rec.DroppedBytes != 25 || rec.OutputBytes != 45 {
		t.Errorf("record = %+v, %v", rec, err)
	}
	// Trimming past it drops it like a chunk.
	p.rec.TrimmedBefore, p.rec.DroppedBytes = 35, 35
	b := p.batch(p.output(t, 10))
	b.DropOutputBefore = 35
	mustAppendProcess(t, s, b)
	got, err := s.ProcessOutput(ctx, store.ProcessOutputParams{ProcessID: "p"})
	if err != nil || len(got) != 2 || got[0].Offset != 35 || got[1].Offset != 45 {
		t.Errorf("ProcessOutput after the trim = %+v, %v", got, err)
	}
	if rec, err := s.Process(ctx, "p"); err != nil || rec.TrimmedBefore != 35 || rec.DroppedBytes != 35 || rec.LostBytes != 25 {
		t.Errorf("record after the trim = %+v, %v", rec, err)
	}
}

func testProcessClose(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := newProc("p", "s1", "", t0)
	mustAppendProcess(t, s, p.batch(p.ev(t, "process.started", nil)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"AppendProcess": func() error { return s.AppendProcess(ctx, p.batch(p.ev(t, "x", nil))) },
		"ReadProcess": func() error {
			_, err := s.ReadProcess(ctx, store.ReadProcessParams{ProcessID: "p"})
			return err
		},
		"ProcessOutput": func() error {
			_, err := s.ProcessOutput(ctx, store.ProcessOutputParams{ProcessID: "p"})
			return err
		},
		"Process":   func() error { _, err := s.Process(ctx, "p"); return err },
		"Processes": func() error { _, err := s.Processes(ctx, store.ListProcessesParams{}); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v; want ErrClosed", name, err)
		}
	}
}

// testProcessReceipts: a process batch stores its receipts in the same
// transaction as its events: both or neither.
func testProcessReceipts(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := newProc("p1", "s1", "work", t0)
	mustAppendProcess(t, s, p.batch(p.ev(t, "process.started", map[string]any{})))
	rcpt := record.Receipt{Key: "k1", Method: "process/signal", Fingerprint: "f", Result: []byte(`{"id":"p1"}`), SessionID: "s1", CreatedAt: t0}
	b := p.batch(p.ev(t, "signal.note", map[string]any{}))
	b.Receipts = []record.Receipt{rcpt}
	mustAppendProcess(t, s, b)
	got, err := s.Receipt(ctx, "k1", "process/signal")
	if err != nil || got.Fingerprint != "f" || string(got.Result) != `{"id":"p1"}` {
		t.Fatalf("receipt stored with the batch: %+v, %v", got, err)
	}
	// The same (key, method) again: the whole batch is refused.
	b = p.batch(p.ev(t, "signal.note", map[string]any{}))
	b.Receipts = []record.Receipt{rcpt}
	if err := s.AppendProcess(ctx, b); !errors.Is(err, store.ErrReceiptExists) {
		t.Fatalf("a batch repeating a receipt: %v; want ErrReceiptExists", err)
	}
	evs, err := s.ReadProcess(ctx, store.ReadProcessParams{ProcessID: "p1"})
	if err != nil || len(evs) != 2 {
		t.Fatalf("the refused batch left events: %v, %v", procSeqs(evs), err)
	}
	// Twice in one batch is refused too.
	p.rec.LastSeq = 2
	b = p.batch(p.ev(t, "signal.note", map[string]any{}))
	r2 := rcpt
	r2.Key = "k2"
	b.Receipts = []record.Receipt{r2, r2}
	if err := s.AppendProcess(ctx, b); !errors.Is(err, store.ErrReceiptExists) {
		t.Fatalf("a receipt twice in one batch: %v", err)
	}
	if _, err := s.Receipt(ctx, "k2", "process/signal"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused batch's receipt was stored: %v", err)
	}
}
