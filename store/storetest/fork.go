package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// forkOwner returns the owner of a fork of source at seq, whose first
// batch is the one it returns (session.forked at seq+1).
func forkOwner(t testing.TB, id, source string, seq int64) (*owner, store.Batch) {
	t.Helper()
	o := &owner{id: id, proj: record.NewProjection(record.Session{LastSeq: seq}, nil), clock: t0.Add(1e9)}
	b := o.batch(t, ev(t, "", event.SessionForked, event.SessionForkedData{
		SessionCreatedData: event.SessionCreatedData{Title: "fork " + id, Model: "scripted:test"},
		From:               source, Seq: seq,
	}))
	return o, b
}

// rewritten returns evs as a fork named id reads them.
func rewritten(evs []event.Event, id string) []event.Event {
	out := make([]event.Event, len(evs))
	for i, e := range evs {
		e.SessionID = id
		out[i] = e
	}
	return out
}

func testFork(t *testing.T, s store.Store) {
	ctx := context.Background()
	src := fixture(t, s, "s1", "r1", "r2")
	fixture(t, s, "s2", "x1", "x2") // a neighbour whose events must not show up

	o, b := forkOwner(t, "f1", "s1", 10)
	mustAppend(t, s, b)
	own := utc(b.Events)
	b = o.batch(t, ev(t, "", event.MessageUser, event.MessageUserData{Content: event.TextParts("in the fork")}),
		ev(t, "", event.MessageUser, event.MessageUserData{Content: event.TextParts("again")}))
	mustAppend(t, s, b)
	own = append(own, utc(b.Events)...)
	want := append(rewritten(src[:10], "f1"), own...)

	eventsEqual(t, readAll(t, s, "f1"), want)
	if last, err := s.LastSeq(ctx, "f1"); err != nil || last != 13 {
		t.Fatalf("LastSeq(f1) = %d, %v; want 13", last, err)
	}
	rec, err := s.Session(ctx, "f1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Fork == nil || *rec.Fork != (record.Fork{SessionID: "s1", Seq: 10}) || rec.LastSeq != 13 || rec.Title != "fork f1" {
		t.Fatalf("Session(f1) = %+v; want a fork of s1 at 10 with last seq 13", rec)
	}

	t.Run("pages", func(t *testing.T) {
		cases := []struct {
			name string
			p    store.ReadParams
			want []int64
		}{
			{"across the fork", store.ReadParams{After: 8, Limit: 4}, []int64{9, 10, 11, 12}},
			{"source only", store.ReadParams{After: 2, Limit: 3}, []int64{3, 4, 5}},
			{"own only", store.ReadParams{After: 11}, []int64{12, 13}},
			{"run of the source", store.ReadParams{RunID: "r2"}, []int64{}},
			{"run r1", store.ReadParams{RunID: "r1", After: 7}, []int64{8, 9}},
			{"types across", store.ReadParams{Types: []event.Type{event.RunQueued, event.MessageUser, event.SessionForked}}, []int64{2, 10, 11, 12, 13}},
			{"through", store.ReadParams{After: 9, Through: 12}, []int64{10, 11, 12}},
			{"through inside the source", store.ReadParams{Through: 3}, []int64{1, 2, 3}},
			{"bytes", store.ReadParams{After: 9, MaxBytes: 1}, []int64{10}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				tc.p.SessionID = "f1"
				got, err := s.Read(ctx, tc.p)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, seqs(got), cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("seqs (-want +got):\n%s", diff)
				}
				for _, e := range got {
					eventsEqual(t, []event.Event{e}, []event.Event{want[e.Seq-1]})
				}
			})
		}
	})

	t.Run("source goes on and is deleted", func(t *testing.T) {
		so := newOwner("s3", t0)
		mustAppend(t, s, so.create(t))
		mustAppend(t, s, so.batch(t, deltasNoRun(t, 4)...))
		fo, fb := forkOwner(t, "f3", "s3", 3)
		mustAppend(t, s, fb)
		before := readAll(t, s, "f3")
		mustAppend(t, s, so.batch(t, deltasNoRun(t, 2)...))
		mustAppend(t, s, so.batch(t, ev(t, "", event.SessionDeleted, struct{}{})))
		eventsEqual(t, readAll(t, s, "f3"), before)
		// A fork of the fork reads through both.
		_, gb := forkOwner(t, "g3", "f3", 4)
		mustAppend(t, s, gb)
		_ = fo
		got := readAll(t, s, "g3")
		wantG := append(rewritten(before[:4], "g3"), utc(gb.Events)...)
		eventsEqual(t, got, wantG)
		if snapErr := s.PutSnapshot(ctx, record.Snapshot{SessionID: "g3", Kind: "k", Seq: 5, Data: []byte(`{}`), CreatedAt: t0}); snapErr != nil {
			t.Fatalf("PutSnapshot(g3 at its last seq) = %v", snapErr)
		}
	})

	t.Run("refused", func(t *testing.T) {
		// Not at Seq+1.
		_, b := forkOwner(t, "f4", "s1", 10)
		b.Events[0].Seq = 12
		rejected(t, s, b, store.ErrSeqConflict)
		_, b = forkOwner(t, "f4", "s1", 10)
		b.Events[0].Seq = 1
		rejected(t, s, b, store.ErrSeqConflict)
		// Beyond the source's log, or of no session.
		_, b = forkOwner(t, "f4", "s1", 16)
		rejected(t, s, b, store.ErrInvalid)
		_, b = forkOwner(t, "f4", "nope", 3)
		rejected(t, s, b, store.ErrInvalid)
		if _, err := s.LastSeq(ctx, "f4"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("LastSeq of a refused fork = %v; want ErrNotFound", err)
		}
	})
}
