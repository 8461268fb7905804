package sqlstore_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/internal/sqlstore"
	"weft.dev/weft/store/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Times come back as they went in, in UTC, the zero time included; sort
// keys clamp what a time column cannot hold instead of failing.
func TestTimes(t *testing.T) {
	east := time.FixedZone("east", 3600)
	for _, tt := range []time.Time{
		{},
		time.Date(2025, 3, 1, 12, 0, 0, 123456789, east),
		time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2261, 12, 31, 0, 0, 0, 0, time.UTC),
	} {
		got := sqlstore.DecodeTime(sqlstore.EncodeTime(tt))
		if !got.Equal(tt) || got.Location() != time.UTC && !tt.IsZero() {
			t.Errorf("DecodeTime(EncodeTime(%v)) = %v", tt, got)
		}
	}
	if k := sqlstore.SortKey(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)); k != math.MinInt64 {
		t.Errorf("SortKey(year 1000) = %d, want the smallest key", k)
	}
	if k := sqlstore.SortKey(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)); k != math.MaxInt64 {
		t.Errorf("SortKey(year 3000) = %d, want the largest key", k)
	}
	if b := sqlstore.Bytes([]byte{}); b != nil {
		t.Errorf("Bytes(empty) = %q, want nil (NULL)", b)
	}
}

// A batch's records are encoded once per ID, the last one, in ID order,
// with their times in UTC, and the caller's batch is left as it was.
func TestEncodeBatch(t *testing.T) {
	east := time.FixedZone("east", 3600)
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, east)
	ev := event.Event{SessionID: "s", Seq: 1, Type: event.SessionCreated, Time: at}
	b := store.Batch{
		SessionID: "s",
		Events:    []event.Event{ev},
		Session:   &record.Session{ID: "s", CreatedAt: at},
		Runs: []record.Run{
			{ID: "r2", SessionID: "s", Status: record.RunQueued, CreatedAt: at},
			{ID: "r1", SessionID: "s", Status: record.RunQueued, CreatedAt: at, StartedAt: &at},
			{ID: "r2", SessionID: "s", Status: record.RunRunning, CreatedAt: at},
		},
		Requests: []record.Request{{ID: "q1", SessionID: "s", RunID: "r1"}},
	}
	recs, err := sqlstore.EncodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs.Runs {
		ids = append(ids, r.ID+":"+r.Status)
		if r.CreatedAt.Location() != time.UTC || r.StartedAt != nil && r.StartedAt.Location() != time.UTC {
			t.Errorf("run %s: times not in UTC: %v, %v", r.ID, r.CreatedAt, r.StartedAt)
		}
	}
	if got := strings.Join(ids, " "); got != "r1:queued r2:running" {
		t.Errorf("runs %s, want r1:queued r2:running", got)
	}
	if len(recs.RunJSON) != 2 || len(recs.Requests) != 1 || len(recs.RequestJSON) != 1 || recs.Session == nil {
		t.Errorf("encoded %d runs, %d requests, session %q", len(recs.RunJSON), len(recs.RequestJSON), recs.Session)
	}
	if !strings.Contains(string(recs.Session), `"createdAt":"2025-03-01T11:00:00Z"`) {
		t.Errorf("session record %s: created time not in UTC", recs.Session)
	}
	if b.Runs[1].StartedAt.Location() != east || b.Runs[0].Status != record.RunQueued {
		t.Error("EncodeBatch changed the caller's batch")
	}

	b.Events = nil
	if _, err := sqlstore.EncodeBatch(b); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("EncodeBatch(no events) = %v, want ErrInvalid", err)
	}
}

// A process's first batch must carry its record; every batch continues
// the log.
func TestContinuesProcess(t *testing.T) {
	b := store.ProcessBatch{ProcessID: "p", Events: []record.ProcessEvent{{Seq: 1, ProcessID: "p", Type: "x"}}}
	if err := sqlstore.ContinuesProcess(b, 0, false); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a new process without its record: %v, want ErrInvalid", err)
	}
	if err := sqlstore.ContinuesProcess(b, 0, true); err != nil {
		t.Errorf("a batch after a record-only start: %v", err)
	}
	if err := sqlstore.ContinuesProcess(b, 1, true); !errors.Is(err, store.ErrSeqConflict) {
		t.Errorf("seq 1 after 1: %v, want ErrSeqConflict", err)
	}
}

// A page of events is cut by size on the server only in a dialect that
// says how; the filters bind their values, one placeholder each.
func TestReadQuery(t *testing.T) {
	p := store.ReadParams{SessionID: "s", After: 7, RunID: "r", Types: []event.Type{"a", "b"}, Limit: 10, MaxBytes: 100}
	q, args := sqlstore.ReadQuery(sqlstore.Dialect{}, p)
	if strings.Contains(q, "OVER") || len(args) != 6 {
		t.Errorf("without PageBytes: %s %v", q, args)
	}
	if !strings.Contains(q, "type IN ($4,$5)") || !strings.HasSuffix(q, "LIMIT $6") {
		t.Errorf("filters: %s", q)
	}
	q, args = sqlstore.ReadQuery(sqlstore.Dialect{PageBytes: "octet_length(data)"}, p)
	if !strings.Contains(q, "sum(octet_length(data)) OVER") || !strings.Contains(q, "before < $7") || len(args) != 7 || args[6] != 100 {
		t.Errorf("with PageBytes: %s %v", q, args)
	}
}
