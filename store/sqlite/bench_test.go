package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	msqlite "modernc.org/sqlite"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
)

// deltaData is ~200 bytes of JSON, like a coalesced message.delta.
var deltaData = func() json.RawMessage {
	b, _ := json.Marshal(event.DeltaData{Step: 3, Text: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)[:175]})
	return b
}()

// benchOwner builds batches as the session owner does: sequenced events
// folded into a projection, with the changed records.
type benchOwner struct {
	id   string
	proj *record.Projection
	now  time.Time
}

func newBenchOwner(b testing.TB, s store.Store, id string) *benchOwner {
	o := &benchOwner{id: id, proj: record.NewProjection(record.Session{}, nil), now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
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
	bt := store.Batch{SessionID: o.id, Events: evs}
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
// The batches are built outside the timer, 256 at a time, so that the
// timer is not stopped around every append.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s := open(b, sqlite.Config{})
			o := newBenchOwner(b, s, "bench")
			ctx := context.Background()
			var next []store.Batch
			var cpu cpuMeter
			b.ReportAllocs()
			cpu.start()
			for b.Loop() {
				if len(next) == 0 {
					b.StopTimer()
					cpu.stop()
					for range 256 {
						next = append(next, o.deltas(b, size))
					}
					cpu.start()
					b.StartTimer()
				}
				if err := s.Append(ctx, next[0]); err != nil {
					b.Fatal(err)
				}
				next = next[1:]
			}
			cpu.report(b)
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkAppendDeadline is BenchmarkAppend/batch=1 as the session's
// journal calls Append: with a context that has a deadline (the journal
// gives each commit 30 s), which a driver that watches contexts pays for.
func BenchmarkAppendDeadline(b *testing.B) {
	s := open(b, sqlite.Config{})
	o := newBenchOwner(b, s, "bench")
	var next []store.Batch
	var cpu cpuMeter
	b.ReportAllocs()
	cpu.start()
	for b.Loop() {
		if len(next) == 0 {
			b.StopTimer()
			cpu.stop()
			for range 256 {
				next = append(next, o.deltas(b, 1))
			}
			cpu.start()
			b.StartTimer()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.Append(ctx, next[0])
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		next = next[1:]
	}
	cpu.report(b)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRawInsert is the floor BenchmarkAppend is measured against: the
// same events table and pragmas, database/sql directly, one transaction per
// batch and one prepared single-row INSERT per event, no records.
func BenchmarkRawInsert(b *testing.B) {
	for _, size := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			db := rawEventsDB(b)
			ins, err := db.Prepare(`INSERT INTO events (session_id, seq, run_id, type, time, data) VALUES (?, ?, ?, ?, ?, ?)`)
			if err != nil {
				b.Fatal(err)
			}
			defer ins.Close()
			seq := int64(0)
			now := time.Now().UnixNano()
			var cpu cpuMeter
			b.ReportAllocs()
			cpu.start()
			for b.Loop() {
				tx, err := db.Begin()
				if err != nil {
					b.Fatal(err)
				}
				st := tx.Stmt(ins)
				for range size {
					seq++
					if _, err := st.Exec("bench", seq, "r-bench", "message.delta", now+seq, []byte(deltaData)); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkRawInsertPinned is BenchmarkRawInsert written the way the
// store's writer is: one connection held for the whole loop, with BEGIN
// IMMEDIATE, the INSERT and COMMIT prepared on it once, instead of
// database/sql's transactions (whose BEGIN and COMMIT the driver parses
// anew each time). It shows what Append costs over SQLite itself, where
// BenchmarkRawInsert shows it against the plain way to use database/sql.
func BenchmarkRawInsertPinned(b *testing.B) {
	for _, size := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx := context.Background()
			conn, err := rawEventsDB(b).Conn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			var stmts [3]*sql.Stmt
			for i, q := range []string{`BEGIN IMMEDIATE`, `INSERT INTO events (session_id, seq, run_id, type, time, data) VALUES (?, ?, ?, ?, ?, ?)`, `COMMIT`} {
				if stmts[i], err = conn.PrepareContext(ctx, q); err != nil {
					b.Fatal(err)
				}
				defer stmts[i].Close()
			}
			begin, ins, commit := stmts[0], stmts[1], stmts[2]
			seq := int64(0)
			now := time.Now().UnixNano()
			var cpu cpuMeter
			b.ReportAllocs()
			cpu.start()
			for b.Loop() {
				if _, err := begin.ExecContext(ctx); err != nil {
					b.Fatal(err)
				}
				for range size {
					seq++
					if _, err := ins.ExecContext(ctx, "bench", seq, "r-bench", "message.delta", now+seq, []byte(deltaData)); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := commit.ExecContext(ctx); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// rawEventsDB returns a database with the store's events table and
// pragmas (WAL, synchronous=NORMAL, immediate transactions), limited to
// one connection, closed when b ends.
func rawEventsDB(b *testing.B) *sql.DB {
	path := filepath.Join(b.TempDir(), "raw.db")
	q := url.Values{"_pragma": {"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(NORMAL)"}, "_txlock": {"immediate"}}
	c, err := msqlite.NewConnector((&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		b.Fatal(err)
	}
	db := sql.OpenDB(c)
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT NOT NULL DEFAULT '',
		type TEXT NOT NULL, time INTEGER NOT NULL, data BLOB, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
		CREATE INDEX events_by_run ON events (session_id, run_id, seq)`); err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkReadAfterCursor reads 200 events after a cursor in the middle of
// a 100,000-event session: the time to a client's first event on resume.
func BenchmarkReadAfterCursor(b *testing.B) {
	s := open(b, sqlite.Config{})
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

// BenchmarkOpen opens an existing store file and closes it again, as a
// one-shot "weft run" does. Its sub-benchmarks: "close" opens and closes;
// "append" also reads the session's last seq and appends one event, so
// that work Open defers to the first read or write is counted too.
func BenchmarkOpen(b *testing.B) {
	path := filepath.Join(b.TempDir(), "weft.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	o := newBenchOwner(b, s, "bench")
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for _, work := range []string{"close", "append"} {
		b.Run(work, func(b *testing.B) {
			var cpu cpuMeter
			b.ReportAllocs()
			cpu.start()
			for b.Loop() {
				s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
				if err != nil {
					b.Fatal(err)
				}
				if work == "append" {
					if _, err := s.LastSeq(ctx, "bench"); err != nil {
						b.Fatal(err)
					}
					if err := s.Append(ctx, o.deltas(b, 1)); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
	}
}

// cpuMeter adds up the CPU time the process uses while it runs, as the
// benchmark timer adds up wall time; on a loaded machine the CPU time per
// operation is the steadier figure.
type cpuMeter struct {
	total, since time.Duration
	running      bool
}

func (m *cpuMeter) start() {
	m.since, m.running = cpuTimeOrZero(), true
}

func (m *cpuMeter) stop() {
	if m.running {
		m.total += cpuTimeOrZero() - m.since
		m.running = false
	}
}

// report stops the meter and reports "cpu-ns/op" where CPU time is known.
func (m *cpuMeter) report(b *testing.B) {
	m.stop()
	if _, ok := cpuTime(); ok && b.N > 0 {
		b.ReportMetric(float64(m.total.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTimeOrZero() time.Duration {
	t, _ := cpuTime()
	return t
}

// BenchmarkAppendSessions appends batches of one message.delta from many
// sessions at once, one goroutine a session (as the journals of a busy
// host do): the figure a store-wide group commit moves.
func BenchmarkAppendSessions(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			s := open(b, sqlite.Config{})
			owners := make([]*benchOwner, n)
			for i := range owners {
				owners[i] = newBenchOwner(b, s, fmt.Sprintf("bench-%d", i))
			}
			ctx := context.Background()
			var cpu cpuMeter
			per := b.N/n + 1
			b.ResetTimer()
			cpu.start()
			var wg sync.WaitGroup
			for _, o := range owners {
				wg.Go(func() {
					for range per {
						if err := s.Append(ctx, o.deltas(b, 1)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			cpu.report(b)
			b.ReportMetric(float64(per*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
