package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	msqlite "modernc.org/sqlite"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/sqlite"
)

// appendResult is what measureAppend measured: events/s per round, and
// each batch's latency.
type appendResult struct {
	store1, raw1, store64, raw64 []float64
	lat1, rawLat1                samples
	// cpu64, rawCPU64 are the process's CPU time over the batch=64 rounds
	// of each, per event: the store's checkpoints run on a goroutine of
	// their own (the raw floor's inside its commits), so its CPU counts
	// them wherever they fall; zero where the CPU cannot be read.
	cpu64, rawCPU64 time.Duration
}

// sessionOwner builds batches as a session's owner does: sequenced events
// folded into a projection, with the records they change.
type sessionOwner struct {
	id   string
	seq  *store.Sequencer
	data json.RawMessage
}

func newSessionOwner(ctx context.Context, st store.Store, id string) (*sessionOwner, error) {
	data, err := json.Marshal(event.DeltaData{Step: 3, Text: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)[:175]})
	if err != nil {
		return nil, err
	}
	o := &sessionOwner{id: id, seq: store.NewSequencer(id, time.Now().Add(-time.Hour)), data: data}
	created, _ := event.New("", event.SessionCreated, event.SessionCreatedData{Title: "append"})
	queued, _ := event.New("run_"+id, event.RunQueued, event.RunQueuedData{Model: "m"})
	started, _ := event.New("run_"+id, event.RunStarted, event.RunStartedData{Model: "m"})
	b, err := o.batch([]event.Event{created, queued, started})
	if err != nil {
		return nil, err
	}
	return o, st.Append(ctx, b)
}

func (o *sessionOwner) batch(evs []event.Event) (store.Batch, error) { return o.seq.Batch(evs) }

// deltas makes a batch of n message.delta events of ~200 bytes of JSON.
func (o *sessionOwner) deltas(n int) (store.Batch, error) {
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{RunID: "run_" + o.id, Type: event.MessageDelta, Data: o.data}
	}
	return o.batch(evs)
}

// rawDB is the floor the store is measured against: the store's events
// table and pragmas, database/sql directly, one transaction per batch and
// one prepared single-row INSERT per event, no records.
type rawDB struct {
	db   *sql.DB
	ins  *sql.Stmt
	seq  int64
	data []byte
}

func openRaw(path string, data []byte) (*rawDB, error) {
	q := url.Values{"_pragma": {"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(NORMAL)"}, "_txlock": {"immediate"}}
	c, err := msqlite.NewConnector((&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT NOT NULL DEFAULT '',
		type TEXT NOT NULL, time INTEGER NOT NULL, data BLOB, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
		CREATE INDEX events_by_run ON events (session_id, run_id, seq)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("raw SQLite: %w", err)
	}
	ins, err := db.Prepare(`INSERT INTO events (session_id, seq, run_id, type, time, data) VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("raw SQLite: %w", err)
	}
	return &rawDB{db: db, ins: ins, data: data}, nil
}

func (r *rawDB) insert(n int) error {
	tx, err := r.db.Begin()
	if err != nil {
		return err
	}
	st := tx.Stmt(r.ins)
	now := time.Now().UnixNano()
	for range n {
		r.seq++
		if _, err := st.Exec("bench", r.seq, "run_bench", "message.delta", now+r.seq, r.data); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

func (r *rawDB) Close() {
	r.ins.Close()
	r.db.Close()
}

// measureAppend appends batches of message.delta events through
// store/sqlite's Store.Append (with the session and run records the
// owner's projection produces; building a batch is not timed) and through
// rawDB, batch=1 and batch=64, the four alternating in rounds.
func measureAppend(ctx context.Context, dir string, rounds, n1, n64 int) (*appendResult, error) {
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "store.db")})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	o, err := newSessionOwner(ctx, st, "ses_append")
	if err != nil {
		return nil, err
	}
	raw, err := openRaw(filepath.Join(dir, "raw.db"), o.data)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	res := &appendResult{}
	viaStore := func(size, batches int, lat *samples) (float64, error) {
		var total time.Duration
		for range batches {
			b, err := o.deltas(size)
			if err != nil {
				return 0, err
			}
			t0 := time.Now()
			if err := st.Append(ctx, b); err != nil {
				return 0, err
			}
			d := time.Since(t0)
			total += d
			if lat != nil {
				*lat = append(*lat, d)
			}
		}
		return float64(size*batches) / total.Seconds(), nil
	}
	viaRaw := func(size, batches int, lat *samples) (float64, error) {
		var total time.Duration
		for range batches {
			t0 := time.Now()
			if err := raw.insert(size); err != nil {
				return 0, fmt.Errorf("raw SQLite: %w", err)
			}
			d := time.Since(t0)
			total += d
			if lat != nil {
				*lat = append(*lat, d)
			}
		}
		return float64(size*batches) / total.Seconds(), nil
	}
	var events64, rawEvents64 int
	for range rounds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, step := range []struct {
			f    func(int, int, *samples) (float64, error)
			size int
			n    int
			out  *[]float64
			lat  *samples
		}{
			{viaStore, 1, n1, &res.store1, &res.lat1},
			{viaRaw, 1, n1, &res.raw1, &res.rawLat1},
			{viaStore, 64, n64, &res.store64, nil},
			{viaRaw, 64, n64, &res.raw64, nil},
		} {
			cpu0, cpuErr := selfCPU()
			rate, err := step.f(step.size, step.n, step.lat)
			if err != nil {
				return nil, err
			}
			*step.out = append(*step.out, rate)
			cpu1, cpuErr1 := selfCPU()
			if step.size == 64 && cpuErr == nil && cpuErr1 == nil {
				if step.out == &res.store64 {
					res.cpu64 += cpu1 - cpu0
					events64 += step.size * step.n
				} else {
					res.rawCPU64 += cpu1 - cpu0
					rawEvents64 += step.size * step.n
				}
			}
		}
	}
	if events64 > 0 && rawEvents64 > 0 {
		res.cpu64 /= time.Duration(events64)
		res.rawCPU64 /= time.Duration(rawEvents64)
	}
	return res, nil
}

func runAppend(ctx context.Context, r *runner) error {
	dir, err := r.tempDir("append")
	if err != nil {
		return err
	}
	res, err := measureAppend(ctx, dir, r.sz.appendRounds, r.sz.append1, r.sz.append64)
	if err != nil {
		return err
	}
	s1, r1, s64, r64 := medianRate(res.store1), medianRate(res.raw1), medianRate(res.store64), medianRate(res.raw64)
	note := fmt.Sprintf("store/sqlite Store.Append with the projection's records vs database/sql inserts on the same table and pragmas; medians of %d alternating rounds", r.sz.appendRounds)
	r.add(Result{
		Name:    "append batch=1 vs raw SQLite",
		Result:  fmt.Sprintf("%s vs %s events/s (%.0f %%)", fmtInt(s1), fmtInt(r1), s1/r1*100),
		Target:  "≥ 50 % of raw",
		Verdict: verdict(s1 >= r1/2),
		Note:    note,
		Values:  map[string]float64{"events_per_s": s1, "raw_events_per_s": r1, "share": s1 / r1},
	})
	r.add(Result{
		Name:    "append batch=64",
		Result:  fmt.Sprintf("%s events/s, %.0f %% of raw (%s); CPU %s vs %s an event", fmtInt(s64), s64/r64*100, fmtInt(r64), fmtDur(res.cpu64), fmtDur(res.rawCPU64)),
		Target:  "≥ 100,000 events/s or ≥ 150 % of raw",
		Verdict: verdict(s64 >= 100_000 || s64 >= 1.5*r64),
		Note:    note + "; the share is the ratio of the rates (the disk sets the floor); CPU is the process's over the rounds, checkpoints included",
		Values: map[string]float64{"events_per_s": s64, "raw_events_per_s": r64, "share": s64 / r64,
			"cpu_us_per_event": float64(res.cpu64) / 1e3, "raw_cpu_us_per_event": float64(res.rawCPU64) / 1e3},
	})
	r.addPlot("append", "Append of one event: store vs raw SQLite", series{"Store.Append", res.lat1}, series{"raw INSERT", res.rawLat1})
	return nil
}
