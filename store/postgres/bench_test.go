package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
	"weft.dev/weft/store/record"
)

// The benchmarks mirror store/sqlite's, on the shared test cluster (a
// local server over its Unix socket, fsync=off: a commit reaches the
// kernel, as SQLite's synchronous=NORMAL does, not the disk).

// deltaData is ~200 bytes of JSON, like a coalesced message.delta.
var deltaData = func() json.RawMessage {
	b, _ := json.Marshal(event.DeltaData{Step: 3, Text: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)[:175]})
	return b
}()

// benchOwner builds batches as the session owner does: sequenced events
// folded into a projection, with the changed records.
type benchOwner struct {
	id    string
	proj  *record.Projection
	now   time.Time
	epoch int64 // the owner's lease epoch, 0 for none
}

func newBenchOwner(b testing.TB, s store.Store, id string) *benchOwner {
	return newLeasedOwner(b, s, id, 0)
}

func newLeasedOwner(b testing.TB, s store.Store, id string, epoch int64) *benchOwner {
	o := &benchOwner{id: id, proj: record.NewProjection(record.Session{}, nil), now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), epoch: epoch}
	created, _ := event.New("", event.SessionCreated, event.SessionCreatedData{Title: "bench"})
	queued, _ := event.New("r-"+id, event.RunQueued, event.RunQueuedData{Model: "m"})
	started, _ := event.New("r-"+id, event.RunStarted, event.RunStartedData{Model: "m"})
	if err := s.Append(context.Background(), o.batch(b, []event.Event{created, queued, started})); err != nil {
		b.Fatal(err)
	}
	return o
}

func (o *benchOwner) batch(b testing.TB, evs []event.Event) store.Batch {
	for i := range evs {
		o.now = o.now.Add(time.Millisecond)
		evs[i].SessionID, evs[i].Seq, evs[i].Time = o.id, o.proj.Session.LastSeq+1, o.now
		if err := o.proj.Apply(evs[i]); err != nil {
			b.Fatal(err)
		}
	}
	bt := store.Batch{SessionID: o.id, Events: evs, Epoch: o.epoch}
	bt.SetRecords(o.proj.Flush())
	return bt
}

func (o *benchOwner) deltas(b testing.TB, n int) store.Batch {
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{RunID: "r-" + o.id, Type: event.MessageDelta, Data: deltaData}
	}
	return o.batch(b, evs)
}

// BenchmarkAppend appends batches of message.delta events, with the session
// and run records the owner's projection produces, through the public API.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s := open(b)
			o := newBenchOwner(b, s, "bench")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				bt := o.deltas(b, size)
				b.StartTimer()
				if err := s.Append(ctx, bt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkAppendLeased is BenchmarkAppend by the holder of the
// session's lease (a row in the leases table, renewed meanwhile): the
// fencing check then finds a row and compares its epoch.
func BenchmarkAppendLeased(b *testing.B) {
	for _, size := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s := open(b)
			ls, err := postgres.NewLeases(s, postgres.LeaseConfig{Holder: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer ls.Close()
			l, err := ls.Acquire(context.Background(), "bench")
			if err != nil {
				b.Fatal(err)
			}
			o := newLeasedOwner(b, s, "bench", l.Epoch())
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				bt := o.deltas(b, size)
				b.StartTimer()
				if err := s.Append(ctx, bt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkRawInsert is the floor BenchmarkAppend is measured against: the
// same events table, pgx directly, one transaction per batch (begun in the
// batch's round trip, committed in a second) with one single-row INSERT
// per event; no lock, no check, no records.
func BenchmarkRawInsert(b *testing.B) {
	for _, size := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx := context.Background()
			url := pg.Database(b)
			openURL(b, url) // the schema
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close(ctx)
			seq := int64(0)
			now := time.Now().UnixNano()
			b.ReportAllocs()
			for b.Loop() {
				var bt pgx.Batch
				bt.BeginTx(pgx.TxOptions{})
				for range size {
					seq++
					bt.Queue(`INSERT INTO events (session_id, seq, run_id, type, time, data) VALUES ($1, $2, $3, $4, $5, $6)`,
						"bench", seq, "r-bench", "message.delta", now+seq, []byte(deltaData))
				}
				br := conn.SendBatch(ctx, &bt)
				tx := br.Tx()
				if err := br.Close(); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkReadAfterCursor reads 200 events after a cursor in the middle of
// a 100,000-event session: the time to a client's first event on resume.
func BenchmarkReadAfterCursor(b *testing.B) {
	s := open(b)
	o := newBenchOwner(b, s, "bench")
	ctx := context.Background()
	for o.proj.Session.LastSeq < 100_000 {
		if err := s.Append(ctx, o.deltas(b, min(500, 100_000-int(o.proj.Session.LastSeq)))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		evs, err := s.Read(ctx, store.ReadParams{SessionID: "bench", After: 50_000, Limit: 200})
		if err != nil || len(evs) != 200 || evs[0].Seq != 50_001 {
			b.Fatalf("read: %d events, %v", len(evs), err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/read")
}

// BenchmarkAppendProcess appends process-log batches of one output chunk
// (the common case of a background process's output), by the host that
// holds the lease of the process's session: each batch is fenced against
// that lease under the session's advisory lock.
func BenchmarkAppendProcess(b *testing.B) {
	s := open(b)
	ctx := context.Background()
	ls, err := postgres.NewLeases(s, postgres.LeaseConfig{Holder: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer ls.Close()
	l, err := ls.Acquire(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	rec := record.Process{ID: "proc_bench", SessionID: "bench", Kind: record.ProcessShell, Status: record.ProcessRunning,
		Disposition: record.OwnerBound, StartedAt: time.Now(), Epoch: l.Epoch()}
	chunk := []byte(`{"stream":"stdout","text":"` + strings.Repeat("x", 100) + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		rec.LastSeq++
		e := record.ProcessEvent{Seq: rec.LastSeq, ProcessID: rec.ID, Type: "process.output", Time: time.Now(), Data: chunk,
			Offset: rec.OutputBytes, Size: 100}
		rec.OutputBytes += 100
		r := rec
		if err := s.AppendProcess(ctx, store.ProcessBatch{ProcessID: rec.ID, Events: []record.ProcessEvent{e}, Record: &r, Epoch: l.Epoch()}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOrphanedSessions is one host's sweep for orphaned processes
// when there are none: 200 sessions each with a running process, all
// held by a live host, and 1000 ended processes beside them.
func BenchmarkOrphanedSessions(b *testing.B) {
	s := open(b)
	ctx := context.Background()
	ls, err := postgres.NewLeases(s, postgres.LeaseConfig{Holder: "bench", TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer ls.Close()
	for i := range 200 {
		id := fmt.Sprintf("s%03d", i)
		l, err := ls.Acquire(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		bt := store.Batch{SessionID: id, Epoch: l.Epoch(), Session: &record.Session{ID: id, CreatedAt: time.Now()},
			Events: []event.Event{{Seq: 1, SessionID: id, Type: event.MessageUser, Time: time.Now(), Data: deltaData}}}
		if err := s.Append(ctx, bt); err != nil {
			b.Fatal(err)
		}
		for j := range 6 {
			status := record.ProcessCompleted
			if j == 0 {
				status = record.ProcessRunning
			}
			rec := record.Process{ID: fmt.Sprintf("proc_%s_%d", id, j), SessionID: id, Kind: record.ProcessShell, Status: status,
				Disposition: record.OwnerBound, StartedAt: time.Now(), LastSeq: 1, Epoch: l.Epoch()}
			if err := s.AppendProcess(ctx, store.ProcessBatch{ProcessID: rec.ID, Record: &rec, Epoch: l.Epoch(),
				Events: []record.ProcessEvent{{Seq: 1, ProcessID: rec.ID, Type: "process.started", Time: time.Now()}}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := postgres.Analyze(ctx, s); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ids, err := s.OrphanedSessions(ctx, 64)
		if err != nil || len(ids) != 0 {
			b.Fatal(ids, err)
		}
	}
}
