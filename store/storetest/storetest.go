// Package storetest is the conformance suite of [store.Store]. Every
// implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { ... })
//	}
//
// The suite checks the contract written in package store, plus the choices
// the contract leaves open that weft's implementations agree on; those are
// listed in the documentation of [Run].
//
// A store that provides leases ([store.LeaseProvider]) also runs
// [RunLeases]: exclusion, and the fencing of appends, process batches
// and snapshots when its leases carry epochs.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// Run runs the conformance suite against stores made by newStore. newStore
// is called once per subtest and must return an empty, open store; it
// should register closing (and removing) the store with t.Cleanup. Closing a
// store twice must be harmless, since one subtest closes its store itself.
//
// Beyond the written contract, the suite requires:
//   - event and record times come back in UTC with their nanoseconds; the
//     zero time is kept; times outside the years 1678..2261 (not
//     representable as Unix nanoseconds) are [store.ErrInvalid];
//   - event data must be valid JSON (or empty, which comes back nil);
//   - records are stored as JSON, so what JSON drops (an empty map under
//     omitempty) comes back nil;
//   - a session is known once it has an event; Session needs a record;
//   - Sessions orders by CreatedAt then ID, newest first; an unknown
//     Before is [store.ErrNotFound]; Session returns deleted sessions;
//   - Runs orders by CreatedAt, FirstSeq, ID; an empty SessionID lists the
//     runs of every session; an unknown session lists nothing;
//   - a run ID that belongs to another session, a record of another session,
//     or a receipt of another session in a batch is [store.ErrInvalid];
//   - a batch receipt whose (key, method) is stored, or that appears twice
//     in the batch, is [store.ErrReceiptExists];
//   - every method of a closed store returns [store.ErrClosed];
//   - a write whose context is done before it starts returns the
//     context's error and writes nothing.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"AppendAndRead", testAppendAndRead},
		{"SeqConflict", testSeqConflict},
		{"InvalidBatch", testInvalidBatch},
		{"ConcurrentAppendSameSession", testConcurrentSameSession},
		{"ConcurrentAppends", testConcurrentAppends},
		{"Read", testRead},
		{"ReadDefaultLimit", testReadDefaultLimit},
		{"ReadMaxBytes", testReadMaxBytes},
		{"UnknownSession", testUnknownSession},
		{"Sessions", testSessions},
		{"SessionsDefaultLimit", testSessionsDefaultLimit},
		{"Runs", testRuns},
		{"Receipts", testReceipts},
		{"ReceiptConflictInAppend", testReceiptConflictInAppend},
		{"PruneReceipts", testPruneReceipts},
		{"Snapshots", testSnapshots},
		{"Copies", testCopies},
		{"Times", testTimes},
		{"Projection", testProjection},
		{"Requests", testRequests},
		{"Fork", testFork},
		{"Close", testClose},
		{"DoneContext", testDoneContext},
		{"ProcessLog", testProcessLog},
		{"ProcessConcurrent", testProcessConcurrent},
		{"ProcessRecords", testProcessRecords},
		{"ProcessOutputTrim", testProcessOutputTrim},
		{"ProcessOutputLost", testProcessOutputLost},
		{"ProcessClose", testProcessClose},
		{"ProcessReceipts", testProcessReceipts},
		{"Purge", testPurge},
		{"PurgeRefused", testPurgeRefused},
		{"PurgeForkSource", testPurgeForkSource},
		{"RetentionLock", testRetentionLock},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// zone is a non-UTC zone: the suite writes local times and expects UTC back.
var zone = time.FixedZone("UTC+1", 3600)

// t0 is the suite's epoch, with nanoseconds.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 123456789, zone)

// Owner plays the session owner: it sequences events, folds them into a
// [record.Projection] and builds the batch with the changed records, exactly
// as weft's session actor does.
type owner struct {
	id    string
	proj  *record.Projection
	clock time.Time
}

func newOwner(id string, start time.Time) *owner {
	return &owner{id: id, proj: record.NewProjection(record.Session{}, nil), clock: start}
}

// ev builds an unsequenced event.
func ev(t testing.TB, runID string, typ event.Type, data any) event.Event {
	t.Helper()
	e, err := event.New(runID, typ, data)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// batch sequences evs, applies them and returns the batch to append.
func (o *owner) batch(t testing.TB, evs ...event.Event) store.Batch {
	t.Helper()
	b := store.Batch{SessionID: o.id}
	for _, e := range evs {
		o.clock = o.clock.Add(time.Millisecond + 7)
		e.SessionID, e.Seq, e.Time = o.id, o.proj.Session.LastSeq+1, o.clock
		if err := o.proj.Apply(e); err != nil {
			t.Fatalf("apply: %v", err)
		}
		b.Events = append(b.Events, e)
	}
	b.SetRecords(o.proj.Flush())
	return b
}

// create returns the batch that creates the session.
func (o *owner) create(t testing.TB) store.Batch {
	t.Helper()
	return o.batch(t, createEvent(t, o.id))
}

func createEvent(t testing.TB, id string) event.Event {
	return ev(t, "", event.SessionCreated, event.SessionCreatedData{
		Title: "session " + id, Model: "scripted:test",
		Metadata: map[string]string{"k": "v"},
		Mounts:   []event.Mount{{ID: "work", Kind: event.KindLocal, Path: "/tmp/work", Mode: event.ModeReadWrite, Default: true}},
	})
}

func deltas(t testing.TB, runID string, n int) []event.Event {
	out := make([]event.Event, n)
	for i := range out {
		out[i] = ev(t, runID, event.MessageDelta, event.DeltaData{Step: 1, Text: fmt.Sprintf("delta %d", i)})
	}
	return out
}

func mustAppend(t testing.TB, s store.Store, b store.Batch) {
	t.Helper()
	if err := s.Append(context.Background(), b); err != nil {
		t.Fatalf("append session %s: %v", b.SessionID, err)
	}
}

func readAll(t testing.TB, s store.Store, sessionID string) []event.Event {
	t.Helper()
	var out []event.Event
	after := int64(0)
	for {
		evs, err := s.Read(context.Background(), store.ReadParams{SessionID: sessionID, After: after, Limit: 500})
		if err != nil {
			t.Fatalf("read session %s after %d: %v", sessionID, after, err)
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
		after = evs[len(evs)-1].Seq
	}
}

// utc returns the events as the store must return them.
func utc(evs []event.Event) []event.Event {
	out := make([]event.Event, len(evs))
	for i, e := range evs {
		e.Time = e.Time.UTC()
		if len(e.Data) == 0 {
			e.Data = nil
		}
		out[i] = e
	}
	return out
}

// eventsEqual compares events including time locations (cmp alone uses
// time.Time.Equal and would accept any zone).
func eventsEqual(t testing.TB, got, want []event.Event) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("events differ (-want +got):\n%s", diff)
	}
	for _, e := range got {
		if e.Time.Location() != time.UTC {
			t.Fatalf("event seq %d: time %s is not in UTC", e.Seq, e.Time)
		}
	}
}

func testAppendAndRead(t *testing.T, s store.Store) {
	ctx := context.Background()
	o := newOwner("s1", t0)
	b1 := o.batch(t, createEvent(t, "s1"), ev(t, "r1", event.RunQueued, event.RunQueuedData{Model: "m", Input: event.TextParts("hi")}))
	if b1.Session == nil || len(b1.Runs) != 1 {
		t.Fatalf("owner batch without records: %+v", b1)
	}
	mustAppend(t, s, b1)
	if b1.Events[0].Seq != 1 || b1.Events[1].Seq != 2 {
		t.Fatalf("first batch seqs %d, %d", b1.Events[0].Seq, b1.Events[1].Seq)
	}
	b2 := o.batch(t, deltas(t, "r1", 3)...)
	mustAppend(t, s, b2)
	last, err := s.LastSeq(ctx, "s1")
	if err != nil || last != 5 {
		t.Fatalf("LastSeq = %d, %v; want 5", last, err)
	}
	want := utc(append(slices.Clone(b1.Events), b2.Events...))
	eventsEqual(t, readAll(t, s, "s1"), want)
	got, err := s.Read(ctx, store.ReadParams{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	eventsEqual(t, got, want)
	sess, err := s.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(o.proj.Session, sess); diff != "" {
		t.Fatalf("session record (-want +got):\n%s", diff)
	}
}

func ptr[T any](v T) *T { return &v }

// state is what a test can observe of one session.
type state struct {
	Last     int64
	LastErr  bool
	Events   []event.Event
	Session  *record.Session
	Runs     []record.Run
	Receipts []record.Receipt
}

func observe(t testing.TB, s store.Store, sessionID string, runIDs []string, receipts [][2]string) state {
	t.Helper()
	ctx := context.Background()
	var st state
	last, err := s.LastSeq(ctx, sessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		st.LastErr = true
	case err != nil:
		t.Fatal(err)
	default:
		st.Last = last
		st.Events = readAll(t, s, sessionID)
	}
	if sess, err := s.Session(ctx, sessionID); err == nil {
		st.Session = &sess
	} else if !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	for _, id := range runIDs {
		if r, err := s.Run(ctx, id); err == nil {
			st.Runs = append(st.Runs, r)
		} else if !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
	}
	for _, k := range receipts {
		if r, err := s.Receipt(ctx, k[0], k[1]); err == nil {
			st.Receipts = append(st.Receipts, r)
		} else if !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
	}
	return st
}

// rejected appends b, expects an error matching want and checks that the
// store is unchanged.
func rejected(t *testing.T, s store.Store, b store.Batch, want error) {
	t.Helper()
	var runIDs []string
	for _, r := range b.Runs {
		runIDs = append(runIDs, r.ID)
	}
	var keys [][2]string
	for _, r := range b.Receipts {
		keys = append(keys, [2]string{r.Key, r.Method})
	}
	sessions := []string{b.SessionID}
	for _, e := range b.Events {
		if !slices.Contains(sessions, e.SessionID) {
			sessions = append(sessions, e.SessionID)
		}
	}
	before := make([]state, len(sessions))
	for i, id := range sessions {
		before[i] = observe(t, s, id, runIDs, keys)
	}
	err := s.Append(context.Background(), b)
	if !errors.Is(err, want) {
		t.Fatalf("Append = %v; want %v", err, want)
	}
	if b.SessionID != "" && !strings.Contains(err.Error(), b.SessionID) {
		t.Errorf("error %q does not name session %s", err, b.SessionID)
	}
	for i, id := range sessions {
		after := observe(t, s, id, runIDs, keys)
		if diff := cmp.Diff(before[i], after, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("rejected batch changed session %s (-before +after):\n%s", id, diff)
		}
	}
}

// withExtras adds a session record, a run and a receipt to a batch so that
// a rejection can be checked to write none of them.
func withExtras(b store.Batch, tag string) store.Batch {
	sess := record.Session{ID: b.SessionID, Title: "rejected " + tag, CreatedAt: t0, UpdatedAt: t0}
	b.Session = &sess
	b.Runs = append(slices.Clone(b.Runs), record.Run{ID: "rejected-run-" + tag, SessionID: b.SessionID, Status: record.RunQueued, CreatedAt: t0})
	b.Receipts = append(slices.Clone(b.Receipts), record.Receipt{Key: "rejected-key-" + tag, Method: "run/start", Fingerprint: "f", Result: json.RawMessage(`{}`), CreatedAt: t0})
	return b
}

func testSeqConflict(t *testing.T, s store.Store) {
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	mustAppend(t, s, o.batch(t, ev(t, "r1", event.RunQueued, event.RunQueuedData{Model: "m"}), ev(t, "r1", event.RunStarted, event.RunStartedData{Model: "m"})))
	// last seq is 3.
	mk := func(sessionID string, seqs ...int64) store.Batch {
		b := store.Batch{SessionID: sessionID}
		for _, q := range seqs {
			b.Events = append(b.Events, event.Event{Seq: q, SessionID: sessionID, RunID: "", Type: event.MessageUser, Time: t0, Data: json.RawMessage(`{"content":[]}`)})
		}
		return b
	}
	cases := []struct {
		name string
		b    store.Batch
	}{
		{"overwrite first", mk("s1", 1)},
		{"overwrite last", mk("s1", 3, 4)},
		{"gap before batch", mk("s1", 5, 6)},
		{"gap inside batch", mk("s1", 4, 6)},
		{"repeat inside batch", mk("s1", 4, 4)},
		{"descending", mk("s1", 4, 3)},
		{"new session not at 1", mk("s2", 2, 3)},
		{"new session at 0", mk("s2", 0, 1)},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := withExtras(tc.b, fmt.Sprint(i))
			rejected(t, s, b, store.ErrSeqConflict)
		})
	}
	// The session is still appendable at 4.
	mustAppend(t, s, o.batch(t, deltas(t, "r1", 2)...))
	if last, err := s.LastSeq(context.Background(), "s1"); err != nil || last != 5 {
		t.Fatalf("LastSeq = %d, %v; want 5", last, err)
	}
}

func testInvalidBatch(t *testing.T, s store.Store) {
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	o2 := newOwner("s2", t0)
	mustAppend(t, s, o2.create(t))
	mustAppend(t, s, o2.batch(t, ev(t, "r2", event.RunQueued, event.RunQueuedData{Model: "m"})))
	good := func() store.Batch {
		return store.Batch{SessionID: "s1", Events: []event.Event{{Seq: 2, SessionID: "s1", Type: event.MessageUser, Time: t0, Data: json.RawMessage(`{}`)}}}
	}
	cases := []struct {
		name   string
		modify func(*store.Batch)
		want   error
	}{
		{"no events", func(b *store.Batch) { b.Events = nil }, store.ErrInvalid},
		{"no session id", func(b *store.Batch) { b.SessionID = "" }, store.ErrInvalid},
		{"event of another session", func(b *store.Batch) {
			b.Events = append(b.Events, event.Event{Seq: 3, SessionID: "s2", Type: event.MessageUser, Time: t0, Data: json.RawMessage(`{}`)})
		}, store.ErrInvalid},
		{"event without type", func(b *store.Batch) { b.Events[0].Type = "" }, store.ErrInvalid},
		{"data not JSON", func(b *store.Batch) { b.Events[0].Data = json.RawMessage(`{"a":`) }, store.ErrInvalid},
		{"time out of range", func(b *store.Batch) { b.Events[0].Time = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC) }, store.ErrInvalid},
		{"record of another session", func(b *store.Batch) { b.Session = &record.Session{ID: "s2"} }, store.ErrInvalid},
		{"run of another session", func(b *store.Batch) {
			b.Runs = []record.Run{{ID: "rx", SessionID: "s2", Status: record.RunQueued}}
		}, store.ErrInvalid},
		{"run ID owned by another session", func(b *store.Batch) {
			b.Runs = []record.Run{{ID: "r2", SessionID: "s1", Status: record.RunQueued}}
		}, store.ErrInvalid},
		{"run without ID", func(b *store.Batch) { b.Runs = []record.Run{{SessionID: "s1"}} }, store.ErrInvalid},
		{"receipt of another session", func(b *store.Batch) {
			b.Receipts = []record.Receipt{{Key: "k", Method: "m", SessionID: "s2"}}
		}, store.ErrInvalid},
		{"receipt without key", func(b *store.Batch) { b.Receipts = []record.Receipt{{Method: "m"}} }, store.ErrInvalid},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := good()
			tc.modify(&b)
			if b.Session == nil && b.SessionID != "" {
				b = withExtras(b, fmt.Sprint(i))
			}
			rejected(t, s, b, tc.want)
		})
	}
	// A new session whose batch is invalid is not created.
	t.Run("new session", func(t *testing.T) {
		b := withExtras(store.Batch{SessionID: "s3", Events: []event.Event{
			{Seq: 1, SessionID: "s3", Type: event.SessionCreated, Time: t0, Data: json.RawMessage(`{}`)},
			{Seq: 2, SessionID: "s3", Type: event.MessageUser, Time: t0, Data: json.RawMessage(`nope`)},
		}}, "new")
		rejected(t, s, b, store.ErrInvalid)
		if _, err := s.LastSeq(context.Background(), "s3"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("LastSeq of rejected new session = %v; want ErrNotFound", err)
		}
	})
	mustAppend(t, s, good())
}

func testConcurrentSameSession(t *testing.T, s store.Store) {
	// Two writers race for the same seq: exactly one wins each round. The
	// contract forbids this usage, but the store must still not corrupt the
	// log.
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	const rounds = 20
	for round := range rounds {
		seq := int64(round + 2)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for w := range errs {
			wg.Go(func() {
				errs[w] = s.Append(context.Background(), store.Batch{SessionID: "s1", Events: []event.Event{
					{Seq: seq, SessionID: "s1", Type: event.MessageUser, Time: t0, Data: json.RawMessage(fmt.Sprintf(`{"w":%d}`, w))},
				}})
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, store.ErrSeqConflict):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d appends of seq %d succeeded; want 1", round, ok, seq)
		}
	}
	evs := readAll(t, s, "s1")
	if len(evs) != rounds+1 {
		t.Fatalf("%d events; want %d", len(evs), rounds+1)
	}
}

func testConcurrentAppends(t *testing.T, s store.Store) {
	const sessions, batches, size = 16, 20, 5
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Go(func() {
			o := newOwner(fmt.Sprintf("c%02d", i), t0)
			if err := s.Append(context.Background(), o.create(t)); err != nil {
				errs <- err
				return
			}
			for range batches {
				if err := s.Append(context.Background(), o.batch(t, ev(t, "", event.MessageUser, event.MessageUserData{}), ev(t, "", event.MessageUser, event.MessageUserData{}),
					ev(t, "", event.MessageUser, event.MessageUserData{}), ev(t, "", event.MessageUser, event.MessageUserData{}), ev(t, "", event.MessageUser, event.MessageUserData{}))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range sessions {
		id := fmt.Sprintf("c%02d", i)
		evs := readAll(t, s, id)
		if len(evs) != 1+batches*size {
			t.Fatalf("session %s: %d events; want %d", id, len(evs), 1+batches*size)
		}
		for j, e := range evs {
			if e.Seq != int64(j+1) || e.SessionID != id {
				t.Fatalf("session %s: event %d is seq %d of %s", id, j, e.Seq, e.SessionID)
			}
		}
	}
	list, err := s.Sessions(context.Background(), store.ListSessionsParams{})
	if err != nil || len(list) != sessions {
		t.Fatalf("Sessions = %d, %v; want %d", len(list), err, sessions)
	}
}

// fixture appends a session with two runs and mixed event types:
//
//	1 session.created, 2 run.queued r1, 3 run.started r1, 4 step.started r1,
//	5-7 message.delta r1, 8 usage r1, 9 run.completed r1, 10 message.user,
//	11 run.queued r2, 12 run.started r2, 13-14 message.delta r2, 15 run.failed r2
func fixture(t testing.TB, s store.Store, id, r1, r2 string) []event.Event {
	o := newOwner(id, t0)
	b := o.create(t)
	mustAppend(t, s, b)
	all := b.Events
	for _, evs := range [][]event.Event{
		{ev(t, r1, event.RunQueued, event.RunQueuedData{Model: "m", Input: event.TextParts("one")}), ev(t, r1, event.RunStarted, event.RunStartedData{Model: "m"})},
		append([]event.Event{ev(t, r1, event.StepStarted, event.StepData{Step: 1})}, deltas(t, r1, 3)...),
		{ev(t, r1, event.Usage, event.UsageData{Step: 1, Usage: event.TokenUsage{InputTokens: 10, OutputTokens: 3}}), ev(t, r1, event.RunCompleted, event.RunEndedData{Steps: 1})},
		{ev(t, "", event.MessageUser, event.MessageUserData{Content: event.TextParts("x")})},
		{ev(t, r2, event.RunQueued, event.RunQueuedData{Model: "m"}), ev(t, r2, event.RunStarted, event.RunStartedData{Model: "m"})},
		append(deltas(t, r2, 2), ev(t, r2, event.RunFailed, event.RunEndedData{Error: &event.Error{Kind: "model", Message: "boom"}})),
	} {
		b := o.batch(t, evs...)
		mustAppend(t, s, b)
		all = append(all, b.Events...)
	}
	if len(all) != 15 {
		t.Fatalf("fixture has %d events", len(all))
	}
	return utc(all)
}

func seqs(evs []event.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func testRead(t *testing.T, s store.Store) {
	all := fixture(t, s, "s1", "r1", "r2")
	fixture(t, s, "s2", "x1", "x2") // a neighbour whose events must not show up
	cases := []struct {
		name string
		p    store.ReadParams
		want []int64
	}{
		{"all", store.ReadParams{}, seqs(all)},
		{"after cursor", store.ReadParams{After: 12}, []int64{13, 14, 15}},
		{"negative cursor", store.ReadParams{After: -5, Limit: 2}, []int64{1, 2}},
		{"limit", store.ReadParams{After: 3, Limit: 4}, []int64{4, 5, 6, 7}},
		{"at end", store.ReadParams{After: 15}, nil},
		{"after end", store.ReadParams{After: 100}, nil},
		{"run", store.ReadParams{RunID: "r2"}, []int64{11, 12, 13, 14, 15}},
		{"run after cursor with limit", store.ReadParams{RunID: "r1", After: 4, Limit: 2}, []int64{5, 6}},
		{"types", store.ReadParams{Types: []event.Type{event.RunQueued, event.RunCompleted, event.RunFailed}}, []int64{2, 9, 11, 15}},
		{"run and types", store.ReadParams{RunID: "r2", Types: []event.Type{event.MessageDelta}}, []int64{13, 14}},
		{"types with limit after filter", store.ReadParams{Types: []event.Type{event.MessageDelta}, Limit: 4}, []int64{5, 6, 7, 13}},
		{"unknown run", store.ReadParams{RunID: "nope"}, nil},
		{"unknown type", store.ReadParams{Types: []event.Type{"nope"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.SessionID = "s1"
			got, err := s.Read(context.Background(), tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, seqs(got), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("seqs (-want +got):\n%s", diff)
			}
			for _, e := range got {
				eventsEqual(t, []event.Event{e}, []event.Event{all[e.Seq-1]})
			}
		})
	}
}

func testReadDefaultLimit(t *testing.T, s store.Store) {
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	for range 6 {
		mustAppend(t, s, o.batch(t, deltasNoRun(t, 200)...))
	}
	for _, limit := range []int{0, -1} {
		got, err := s.Read(context.Background(), store.ReadParams{SessionID: "s1", Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1000 || got[0].Seq != 1 || got[999].Seq != 1000 {
			t.Fatalf("limit %d: got %d events; want 1..1000", limit, len(got))
		}
	}
	got, err := s.Read(context.Background(), store.ReadParams{SessionID: "s1", Limit: 5000})
	if err != nil || len(got) != 1201 {
		t.Fatalf("limit 5000: got %d, %v; want 1201", len(got), err)
	}
}

// testReadMaxBytes: a page stops once its data reach MaxBytes, holds at
// least one event, and reading on from its end misses nothing.
func testReadMaxBytes(t *testing.T, s store.Store) {
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	mustAppend(t, s, o.batch(t, deltasNoRun(t, 100)...))
	ctx := context.Background()
	first, err := s.Read(ctx, store.ReadParams{SessionID: "s1", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	one := len(first[1].Data)
	got, err := s.Read(ctx, store.ReadParams{SessionID: "s1", After: 1, MaxBytes: 3 * one})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 3 || len(got) > 4 {
		t.Fatalf("MaxBytes %d (3 events of %d bytes): got %d events", 3*one, one, len(got))
	}
	got, err = s.Read(ctx, store.ReadParams{SessionID: "s1", After: 1, MaxBytes: 1})
	if err != nil || len(got) != 1 || got[0].Seq != 2 {
		t.Fatalf("MaxBytes 1: got %v, %v; want the one event seq 2", seqs(got), err)
	}
	var all []int64
	for after := int64(0); ; {
		page, err := s.Read(ctx, store.ReadParams{SessionID: "s1", After: after, MaxBytes: 5 * one})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, seqs(page)...)
		after = page[len(page)-1].Seq
	}
	if len(all) != len(first) {
		t.Fatalf("paging by bytes read %d events; want %d", len(all), len(first))
	}
}

func deltasNoRun(t testing.TB, n int) []event.Event {
	out := make([]event.Event, n)
	for i := range out {
		out[i] = ev(t, "", event.MessageUser, event.MessageUserData{Content: event.TextParts(fmt.Sprint(i))})
	}
	return out
}

func testUnknownSession(t *testing.T, s store.Store) {
	ctx := context.Background()
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	if _, err := s.Read(ctx, store.ReadParams{SessionID: "nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Read = %v; want ErrNotFound", err)
	}
	if _, err := s.LastSeq(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LastSeq = %v; want ErrNotFound", err)
	}
	if _, err := s.Session(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Session = %v; want ErrNotFound", err)
	}
	if _, err := s.Run(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Run = %v; want ErrNotFound", err)
	}
	if _, err := s.Receipt(ctx, "k", "m"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Receipt = %v; want ErrNotFound", err)
	}
	if runs, err := s.Runs(ctx, store.ListRunsParams{SessionID: "nope"}); err != nil || len(runs) != 0 {
		t.Errorf("Runs = %v, %v; want none", runs, err)
	}
	// A session with events but no record is known to the log only.
	mustAppend(t, s, store.Batch{SessionID: "bare", Events: []event.Event{{Seq: 1, SessionID: "bare", Type: event.MessageUser, Time: t0}}})
	if last, err := s.LastSeq(ctx, "bare"); err != nil || last != 1 {
		t.Errorf("LastSeq(bare) = %d, %v", last, err)
	}
	if _, err := s.Session(ctx, "bare"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Session(bare) = %v; want ErrNotFound", err)
	}
	got, err := s.Read(ctx, store.ReadParams{SessionID: "bare"})
	if err != nil || len(got) != 1 || got[0].Data != nil {
		t.Errorf("Read(bare) = %+v, %v; want one event with nil data", got, err)
	}
}

func ids(list []record.Session) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.ID
	}
	return out
}

func testSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	// s0..s5 created one minute apart; s2 is deleted; sa and sb share a
	// creation time (ID breaks the tie).
	var owners []*owner
	for i := range 6 {
		o := newOwner(fmt.Sprintf("s%d", i), t0.Add(time.Duration(i)*time.Minute))
		mustAppend(t, s, o.create(t))
		owners = append(owners, o)
	}
	for _, id := range []string{"sa", "sb"} {
		o := newOwner(id, t0.Add(10*time.Minute))
		mustAppend(t, s, o.create(t))
	}
	mustAppend(t, s, owners[2].batch(t, ev(t, "", event.SessionDeleted, struct{}{})))
	// Updating an old session does not move it.
	mustAppend(t, s, owners[0].batch(t, ev(t, "", event.SessionUpdated, event.SessionUpdatedData{Title: ptr("renamed")})))

	list := func(p store.ListSessionsParams) []string {
		t.Helper()
		l, err := s.Sessions(ctx, p)
		if err != nil {
			t.Fatalf("Sessions(%+v): %v", p, err)
		}
		return ids(l)
	}
	check := func(name string, got, want []string) {
		t.Helper()
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	check("all", list(store.ListSessionsParams{}), []string{"sb", "sa", "s5", "s4", "s3", "s1", "s0"})
	check("with deleted", list(store.ListSessionsParams{IncludeDeleted: true}), []string{"sb", "sa", "s5", "s4", "s3", "s2", "s1", "s0"})
	check("page 1", list(store.ListSessionsParams{Limit: 3}), []string{"sb", "sa", "s5"})
	check("page 2", list(store.ListSessionsParams{Limit: 3, Before: "s5"}), []string{"s4", "s3", "s1"})
	check("page 3", list(store.ListSessionsParams{Limit: 3, Before: "s1"}), []string{"s0"})
	check("page 4", list(store.ListSessionsParams{Limit: 3, Before: "s0"}), nil)
	check("tie", list(store.ListSessionsParams{Limit: 1, Before: "sb"}), []string{"sa"})
	check("before deleted", list(store.ListSessionsParams{Before: "s2"}), []string{"s1", "s0"})
	check("before deleted, with deleted", list(store.ListSessionsParams{Before: "s3", IncludeDeleted: true, Limit: 2}), []string{"s2", "s1"})
	if _, err := s.Sessions(ctx, store.ListSessionsParams{Before: "nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Sessions(Before: unknown) = %v; want ErrNotFound", err)
	}

	l, err := s.Sessions(ctx, store.ListSessionsParams{Limit: 100, IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range l {
		o := owners[0]
		for _, oo := range owners {
			if oo.id == got.ID {
				o = oo
			}
		}
		if o.id != got.ID {
			continue
		}
		if diff := cmp.Diff(o.proj.Session, got); diff != "" {
			t.Errorf("listed session %s (-want +got):\n%s", got.ID, diff)
		}
	}
	del, err := s.Session(ctx, "s2")
	if err != nil || !del.Deleted {
		t.Fatalf("Session(deleted) = %+v, %v; want the record with Deleted", del, err)
	}
	if got, _ := s.Session(ctx, "s0"); got.Title != "renamed" || !got.CreatedAt.Equal(owners[0].proj.Session.CreatedAt) {
		t.Errorf("updated session = %+v", got)
	}
}

func testSessionsDefaultLimit(t *testing.T, s store.Store) {
	for i := range 105 {
		o := newOwner(fmt.Sprintf("s%03d", i), t0.Add(time.Duration(i)*time.Second))
		mustAppend(t, s, o.create(t))
	}
	l, err := s.Sessions(context.Background(), store.ListSessionsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 100 || l[0].ID != "s104" || l[99].ID != "s005" {
		t.Fatalf("got %d sessions from %v; want 100 from s104", len(l), ids(l[:1]))
	}
}

func runIDs(runs []record.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

func testRuns(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newOwner("sa", t0)
	b := newOwner("sb", t0.Add(1500*time.Microsecond)) // b1 is queued between a2 and a3
	mustAppend(t, s, a.create(t))
	mustAppend(t, s, b.create(t))
	queue := func(o *owner, id string) {
		mustAppend(t, s, o.batch(t, ev(t, id, event.RunQueued, event.RunQueuedData{Model: "m", MaxSteps: 3})))
	}
	queue(a, "a1")
	queue(b, "b1")
	queue(a, "a2")
	queue(a, "a3")
	mustAppend(t, s, a.batch(t, ev(t, "a1", event.RunStarted, event.RunStartedData{}), ev(t, "a1", event.RunCompleted, event.RunEndedData{}),
		ev(t, "a2", event.RunStarted, event.RunStartedData{})))
	mustAppend(t, s, b.batch(t, ev(t, "b1", event.RunStarted, event.RunStartedData{})))

	list := func(p store.ListRunsParams) []string {
		t.Helper()
		l, err := s.Runs(ctx, p)
		if err != nil {
			t.Fatalf("Runs(%+v): %v", p, err)
		}
		return runIDs(l)
	}
	check := func(name string, got, want []string) {
		t.Helper()
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	check("session a", list(store.ListRunsParams{SessionID: "sa"}), []string{"a1", "a2", "a3"})
	check("session b", list(store.ListRunsParams{SessionID: "sb"}), []string{"b1"})
	check("all sessions", list(store.ListRunsParams{}), []string{"a1", "a2", "b1", "a3"})
	check("running", list(store.ListRunsParams{Statuses: []string{record.RunRunning}}), []string{"a2", "b1"})
	check("a active", list(store.ListRunsParams{SessionID: "sa", Statuses: []string{record.RunQueued, record.RunRunning, record.RunWaiting}}), []string{"a2", "a3"})
	check("limit", list(store.ListRunsParams{SessionID: "sa", Limit: 2}), []string{"a1", "a2"})
	check("no match", list(store.ListRunsParams{SessionID: "sa", Statuses: []string{record.RunFailed}}), nil)

	for _, o := range []*owner{a, b} {
		for _, want := range o.proj.Runs() {
			got, err := s.Run(ctx, want.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("run %s (-want +got):\n%s", want.ID, diff)
			}
		}
	}
	if r, _ := s.Run(ctx, "a1"); r.Status != record.RunCompleted || r.StartedAt == nil || r.EndedAt == nil || r.MaxSteps != 3 {
		t.Errorf("run a1 = %+v", r)
	}
}

func testReceipts(t *testing.T, s store.Store) {
	ctx := context.Background()
	o := newOwner("s1", t0)
	b := o.create(t)
	rec := record.Receipt{Key: "k1", Method: "session/create", Fingerprint: "fp1", Result: json.RawMessage(`{"id": "s1"}`), SessionID: "s1", CreatedAt: t0}
	b.Receipts = []record.Receipt{rec, {Key: "k1", Method: "run/start", Fingerprint: "fp2", Result: json.RawMessage(`{}`), CreatedAt: t0}}
	mustAppend(t, s, b)
	want := rec
	want.CreatedAt = t0.UTC()
	got, err := s.Receipt(ctx, "k1", "session/create")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("receipt (-want +got):\n%s", diff)
	}
	if got.CreatedAt.Location() != time.UTC {
		t.Errorf("receipt time %s not in UTC", got.CreatedAt)
	}
	if _, err := s.Receipt(ctx, "k1", "run/start"); err != nil {
		t.Fatalf("same key, other method: %v", err)
	}
	if _, err := s.Receipt(ctx, "k1", "run/cancel"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown method: %v", err)
	}

	// PutReceipt: new, then existing returns the stored one.
	fresh := record.Receipt{Key: "k2", Method: "run/steer", Fingerprint: "a", Result: json.RawMessage(`[1, 2]`), CreatedAt: t0.Add(time.Hour)}
	put, err := s.PutReceipt(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	fresh.CreatedAt = fresh.CreatedAt.UTC()
	if diff := cmp.Diff(fresh, put); diff != "" {
		t.Fatalf("PutReceipt new (-want +got):\n%s", diff)
	}
	other := record.Receipt{Key: "k2", Method: "run/steer", Fingerprint: "b", Result: json.RawMessage(`"other"`), CreatedAt: t0.Add(2 * time.Hour)}
	put, err = s.PutReceipt(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fresh, put); diff != "" {
		t.Fatalf("PutReceipt existing (-want +got):\n%s", diff)
	}
	if got, _ := s.Receipt(ctx, "k2", "run/steer"); got.Fingerprint != "a" {
		t.Fatalf("existing receipt overwritten: %+v", got)
	}
	put, err = s.PutReceipt(ctx, record.Receipt{Key: "k1", Method: "session/create", Fingerprint: "zzz"})
	if err != nil || put.Fingerprint != "fp1" {
		t.Fatalf("PutReceipt of a batch receipt = %+v, %v", put, err)
	}
	// A zero time and a nil result are kept.
	put, err = s.PutReceipt(ctx, record.Receipt{Key: "k3", Method: "m"})
	if err != nil || !put.CreatedAt.IsZero() || put.Result != nil {
		t.Fatalf("PutReceipt zero = %+v, %v", put, err)
	}
	if got, err := s.Receipt(ctx, "k3", "m"); err != nil || !got.CreatedAt.IsZero() || got.Result != nil {
		t.Fatalf("Receipt zero = %+v, %v", got, err)
	}
	if _, err := s.PutReceipt(ctx, record.Receipt{Method: "m"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("PutReceipt without key = %v; want ErrInvalid", err)
	}
}

func testReceiptConflictInAppend(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.PutReceipt(ctx, record.Receipt{Key: "dup", Method: "run/start", Fingerprint: "x", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	next := func() store.Batch {
		return store.Batch{SessionID: "s1", Events: []event.Event{{Seq: 2, SessionID: "s1", Type: event.MessageUser, Time: t0, Data: json.RawMessage(`{}`)}},
			Session: &record.Session{ID: "s1", Title: "changed"}, Runs: []record.Run{{ID: "rr", SessionID: "s1", Status: record.RunQueued}}}
	}
	b := next()
	b.Receipts = []record.Receipt{{Key: "fresh", Method: "run/start", CreatedAt: t0}, {Key: "dup", Method: "run/start", Fingerprint: "y", CreatedAt: t0}}
	rejected(t, s, b, store.ErrReceiptExists)
	b = next()
	b.Receipts = []record.Receipt{{Key: "twice", Method: "run/start", CreatedAt: t0}, {Key: "twice", Method: "run/start", CreatedAt: t0}}
	rejected(t, s, b, store.ErrReceiptExists)
	if got, _ := s.Receipt(ctx, "dup", "run/start"); got.Fingerprint != "x" {
		t.Fatalf("receipt overwritten: %+v", got)
	}
	b = next()
	b.Receipts = []record.Receipt{{Key: "dup", Method: "run/steer", CreatedAt: t0}}
	mustAppend(t, s, b)
}

func testSnapshots(t *testing.T, s store.Store) {
	ctx := context.Background()
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	mustAppend(t, s, o.batch(t, ev(t, "", event.SessionUpdated, event.SessionUpdatedData{})))
	if _, err := s.Snapshot(ctx, "s1", record.SnapshotTranscript); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no snapshot yet: %v", err)
	}
	if err := s.PutSnapshot(ctx, record.Snapshot{SessionID: "nope", Kind: "k", Seq: 1, Data: []byte("x"), CreatedAt: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("snapshot of an unknown session: %v", err)
	}
	if err := s.PutSnapshot(ctx, record.Snapshot{SessionID: "s1", Kind: "k", Seq: 3, Data: []byte("x"), CreatedAt: t0}); !errors.Is(err, store.ErrSeqConflict) {
		t.Fatalf("snapshot beyond the last event: %v", err)
	}
	put := func(seq int64, data string) {
		t.Helper()
		if err := s.PutSnapshot(ctx, record.Snapshot{SessionID: "s1", Kind: "k", Seq: seq, Data: []byte(data), CreatedAt: t0.Add(time.Duration(seq) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(kind string) record.Snapshot {
		t.Helper()
		got, err := s.Snapshot(ctx, "s1", kind)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	put(2, "two")
	want := record.Snapshot{SessionID: "s1", Kind: "k", Seq: 2, Data: []byte("two"), CreatedAt: t0.Add(2 * time.Second).UTC()}
	if diff := cmp.Diff(want, get("k")); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}
	put(1, "one") // older: the newer one stays
	if got := get("k"); got.Seq != 2 || string(got.Data) != "two" {
		t.Fatalf("an older snapshot replaced a newer one: %d %q", got.Seq, got.Data)
	}
	put(2, "two again") // same seq: replaced
	if got := get("k"); string(got.Data) != "two again" {
		t.Fatalf("same seq not replaced: %q", got.Data)
	}
	if _, err := s.Snapshot(ctx, "s1", "other"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another kind: %v", err)
	}
	got := get("k")
	got.Data[0] = 'X'
	if again := get("k"); string(again.Data) != "two again" {
		t.Fatalf("the caller's copy aliases the store's: %q", again.Data)
	}
}

func testPruneReceipts(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := range 5 {
		if _, err := s.PutReceipt(ctx, record.Receipt{Key: fmt.Sprint(i), Method: "m", CreatedAt: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.PruneReceipts(ctx, t0.Add(2*time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("PruneReceipts = %d, %v; want 2", n, err)
	}
	for i := range 5 {
		_, err := s.Receipt(ctx, fmt.Sprint(i), "m")
		if gone := errors.Is(err, store.ErrNotFound); gone != (i < 2) {
			t.Errorf("receipt %d: err %v after prune", i, err)
		}
	}
	if n, err := s.PruneReceipts(ctx, t0.Add(2*time.Minute)); err != nil || n != 0 {
		t.Fatalf("second PruneReceipts = %d, %v; want 0", n, err)
	}
	if n, err := s.PruneReceipts(ctx, t0.Add(time.Hour)); err != nil || n != 3 {
		t.Fatalf("PruneReceipts all = %d, %v; want 3", n, err)
	}
}

func testCopies(t *testing.T, s store.Store) {
	ctx := context.Background()
	o := newOwner("s1", t0)
	b := o.create(t)
	b.Receipts = []record.Receipt{{Key: "k", Method: "m", Result: json.RawMessage(`{"a":1}`), CreatedAt: t0}}
	wantEvents := utc([]event.Event{b.Events[0]})
	wantEvents[0].Data = slices.Clone(wantEvents[0].Data)
	wantSession := o.proj.Session
	wantSession.Metadata = map[string]string{"k": "v"}
	mustAppend(t, s, b)
	// Mutate what was passed in.
	b.Events[0].Data[0] = 'X'
	b.Session.Metadata["k"] = "changed"
	b.Session.Binding.Mounts[0].Path = "/changed"
	b.Receipts[0].Result[0] = 'X'
	// Mutate what came out.
	got, _ := s.Read(ctx, store.ReadParams{SessionID: "s1"})
	got[0].Data[0] = 'Y'
	sess, _ := s.Session(ctx, "s1")
	sess.Metadata["k"] = "changed"
	sess.Binding.Mounts[0].Path = "/changed"
	r, _ := s.Receipt(ctx, "k", "m")
	r.Result[0] = 'Y'

	eventsEqual(t, readAll(t, s, "s1"), wantEvents)
	sess, _ = s.Session(ctx, "s1")
	if sess.Metadata["k"] != "v" || sess.Binding.Mounts[0].Path != "/tmp/work" {
		t.Errorf("stored session changed through a caller's map or slice: %+v", sess)
	}
	if r, _ := s.Receipt(ctx, "k", "m"); string(r.Result) != `{"a":1}` {
		t.Errorf("stored receipt changed: %s", r.Result)
	}
}

func testTimes(t *testing.T, s store.Store) {
	ctx := context.Background()
	times := []time.Time{
		time.Date(2025, 1, 2, 3, 4, 5, 999999999, time.FixedZone("X", -7*3600)),
		time.Date(1970, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2261, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Now(), // with a monotonic reading
		{},         // zero
	}
	b := store.Batch{SessionID: "s1"}
	for i, tm := range times {
		b.Events = append(b.Events, event.Event{Seq: int64(i + 1), SessionID: "s1", Type: event.MessageUser, Time: tm, Data: json.RawMessage(`{}`)})
	}
	started := times[0]
	b.Session = &record.Session{ID: "s1", CreatedAt: times[0], UpdatedAt: times[4]}
	b.Runs = []record.Run{{ID: "r", SessionID: "s1", CreatedAt: times[2], StartedAt: &started}}
	mustAppend(t, s, b)
	got, err := s.Read(ctx, store.ReadParams{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		want := times[i].UTC()
		if !e.Time.Equal(want) || e.Time.Location() != time.UTC || e.Time.IsZero() != want.IsZero() {
			t.Errorf("time %d: got %s; want %s", i, e.Time, want)
		}
	}
	// UpdatedAt is the time of the session's last event, read from the log.
	sess, _ := s.Session(ctx, "s1")
	if !sess.CreatedAt.Equal(times[0]) || sess.CreatedAt.Location() != time.UTC || !sess.UpdatedAt.Equal(got[len(got)-1].Time) {
		t.Errorf("session times %s, %s", sess.CreatedAt, sess.UpdatedAt)
	}
	r, _ := s.Run(ctx, "r")
	if !r.CreatedAt.Equal(times[2]) || r.StartedAt == nil || !r.StartedAt.Equal(times[0]) || r.StartedAt.Location() != time.UTC || r.EndedAt != nil {
		t.Errorf("run times %+v", r)
	}
}

func testProjection(t *testing.T, s store.Store) {
	ctx := context.Background()
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	steps := [][]event.Event{
		{ev(t, "r1", event.RunQueued, event.RunQueuedData{Model: "openai:gpt", MaxSteps: 8, Input: event.TextParts("hello")}),
			ev(t, "r1", event.MessageUser, event.MessageUserData{Content: event.TextParts("hello")})},
		{ev(t, "r1", event.RunStarted, event.RunStartedData{Model: "openai:gpt"}), ev(t, "r1", event.StepStarted, event.StepData{Step: 1})},
		deltas(t, "r1", 4),
		{ev(t, "r1", event.MessageCompleted, event.MessageCompletedData{Step: 1, Text: "hi", ToolCalls: []event.ToolCall{{ID: "c1", Name: "read", Arguments: `{"path":"a"}`}}}),
			ev(t, "r1", event.ToolCallStarted, event.ToolCallStartedData{Step: 1, ToolCall: event.ToolCall{ID: "c1", Name: "read"}}),
			ev(t, "r1", event.Usage, event.UsageData{Step: 1, Usage: event.TokenUsage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5}})},
		// r2 is queued while r1 runs.
		{ev(t, "r2", event.RunQueued, event.RunQueuedData{Model: "openai:gpt", Input: event.TextParts("next")})},
		{ev(t, "r1", event.ToolCallCompleted, event.ToolCallCompletedData{ID: "c1", Name: "read", Output: "data", DurationMs: 3}),
			ev(t, "r1", event.SteerAccepted, event.SteerData{SteerID: "st1", Input: event.TextParts("faster")}),
			ev(t, "r1", event.StepStarted, event.StepData{Step: 2}), ev(t, "r1", event.SteerConsumed, event.SteerData{SteerID: "st1", Step: 2})},
		{ev(t, "r1", event.Usage, event.UsageData{Step: 2, Usage: event.TokenUsage{InputTokens: 130, OutputTokens: 7, ReasoningTokens: 2}}),
			ev(t, "r1", event.RunCompleted, event.RunEndedData{Steps: 2})},
		{ev(t, "", event.SessionUpdated, event.SessionUpdatedData{Title: ptr("renamed")}),
			ev(t, "", event.MountAdded, event.MountChangeData{Mount: event.Mount{ID: "docs", Kind: event.KindLocal, Path: "/docs", Mode: event.ModeReadOnly},
				BindingVersion: 2, Mounts: []event.Mount{{ID: "work", Kind: event.KindLocal, Path: "/tmp/work", Mode: event.ModeReadWrite, Default: true}, {ID: "docs", Kind: event.KindLocal, Path: "/docs", Mode: event.ModeReadOnly}}})},
		{ev(t, "r2", event.RunStarted, event.RunStartedData{Model: "openai:gpt"}), ev(t, "r2", event.StepStarted, event.StepData{Step: 1})},
		{ev(t, "r2", event.RunFailed, event.RunEndedData{Steps: 1, Error: &event.Error{Kind: "model", Message: "429", Retryable: true}})},
		{ev(t, "r3", event.RunQueued, event.RunQueuedData{Model: "m"})},
	}
	for _, evs := range steps {
		mustAppend(t, s, o.batch(t, evs...))
	}

	// Rebuild from the log, reading in small pages.
	p := record.NewProjection(record.Session{}, nil)
	after := int64(0)
	for {
		evs, err := s.Read(ctx, store.ReadParams{SessionID: "s1", After: after, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if err := p.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		after = evs[len(evs)-1].Seq
	}
	sess, err := s.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p.Session, sess); diff != "" {
		t.Errorf("stored session differs from the log's projection (-log +stored):\n%s", diff)
	}
	if diff := cmp.Diff(o.proj.Session, sess); diff != "" {
		t.Errorf("stored session differs from the owner's (-owner +stored):\n%s", diff)
	}
	if sess.ActiveRunID != "r3" || sess.Title != "renamed" || sess.Binding.BindingVersion != 2 || sess.LastSeq != after {
		t.Errorf("session = %+v", sess)
	}
	stored, err := s.Runs(ctx, store.ListRunsParams{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	want := p.Runs()
	slices.SortFunc(want, func(a, b record.Run) int { return int(a.FirstSeq - b.FirstSeq) })
	if diff := cmp.Diff(want, stored); diff != "" {
		t.Errorf("stored runs differ from the log's projection (-log +stored):\n%s", diff)
	}
	for _, w := range want {
		got, err := s.Run(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("run %s (-log +stored):\n%s", w.ID, diff)
		}
	}
	r1, _ := s.Run(ctx, "r1")
	if r1.Steps != 2 || r1.Usage.InputTokens != 230 || r1.Status != record.RunCompleted {
		t.Errorf("r1 = %+v", r1)
	}
}

func testClose(t *testing.T, s store.Store) {
	ctx := context.Background()
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	calls := map[string]func() error{
		"Append": func() error { return s.Append(ctx, o.batch(t, deltasNoRun(t, 1)...)) },
		"Read":   func() error { _, err := s.Read(ctx, store.ReadParams{SessionID: "s1"}); return err },
		"LastSeq": func() error {
			_, err := s.LastSeq(ctx, "s1")
			return err
		},
		"Session":  func() error { _, err := s.Session(ctx, "s1"); return err },
		"Sessions": func() error { _, err := s.Sessions(ctx, store.ListSessionsParams{}); return err },
		"Run":      func() error { _, err := s.Run(ctx, "r"); return err },
		"Runs":     func() error { _, err := s.Runs(ctx, store.ListRunsParams{}); return err },
		"Receipt":  func() error { _, err := s.Receipt(ctx, "k", "m"); return err },
		"PutReceipt": func() error {
			_, err := s.PutReceipt(ctx, record.Receipt{Key: "k", Method: "m"})
			return err
		},
		"PruneReceipts": func() error { _, err := s.PruneReceipts(ctx, t0); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v; want ErrClosed", name, err)
		}
	}
}

// testRequests: approvals, questions and client tool calls are records
// projected from their events like runs: open ones make the run waiting,
// the first answer closes them, and the store lists them by session, run
// and status.
func testRequests(t *testing.T, s store.Store) {
	ctx := context.Background()
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	call := func(id, name string) event.ToolCall { return event.ToolCall{ID: id, Name: name, Arguments: `{}`} }
	deadline := t0.Add(time.Hour)
	mustAppend(t, s, o.batch(t,
		ev(t, "r1", event.RunQueued, event.RunQueuedData{Model: "m", Input: event.TextParts("go")}),
		ev(t, "r1", event.RunStarted, event.RunStartedData{Model: "m"}),
		ev(t, "r1", event.MessageCompleted, event.MessageCompletedData{Step: 1, ToolCalls: []event.ToolCall{call("c1", "shell"), call("c2", "ask_user"), call("c3", "pick")}}),
		ev(t, "r1", event.ApprovalRequested, event.ApprovalRequestedData{ApprovalID: "apr_1", Step: 1, ToolCall: call("c1", "shell"),
			Rule: event.Rule{Tool: "shell", Action: "ask", Source: "preset:ask-writes"}, Options: []string{event.DecisionAllowOnce, event.DecisionDeny}, Deadline: &deadline, Default: event.DecisionDeny}),
		ev(t, "r1", event.InputRequested, event.InputRequestedData{RequestID: "inp_1", Step: 1, ToolCall: call("c2", "ask_user"), Question: "which?", Choices: []string{"a", "b"}}),
		ev(t, "r1", event.ToolCallRequested, event.ToolCallRequestedData{RequestID: "tcr_1", Step: 1, ToolCall: call("c3", "pick")}),
	))
	r, err := s.Run(ctx, "r1")
	if err != nil || r.Status != record.RunWaiting || len(r.Requests) != 3 {
		t.Fatalf("run with three open requests: %+v, %v", r, err)
	}
	open, err := s.Requests(ctx, store.ListRequestsParams{SessionID: "s1", Statuses: []string{record.RequestOpen}})
	if err != nil || len(open) != 3 || open[0].ID != "apr_1" || open[1].ID != "inp_1" || open[2].ID != "tcr_1" {
		t.Fatalf("open requests: %+v, %v", open, err)
	}
	if open[0].Rule == nil || open[0].Rule.Source != "preset:ask-writes" || open[0].Deadline == nil || !open[0].Deadline.Equal(deadline) || open[1].Question != "which?" {
		t.Fatalf("request records: %+v", open)
	}
	one := 1
	mustAppend(t, s, o.batch(t,
		ev(t, "r1", event.ApprovalResolved, event.ApprovalResolvedData{ApprovalID: "apr_1", Decision: event.DecisionAllowOnce, By: event.By{Client: "cli"}}),
		ev(t, "r1", event.InputResolved, event.InputResolvedData{RequestID: "inp_1", Status: event.InputAnswered, Text: "b", Choice: &one}),
		ev(t, "r1", event.ToolCallCompleted, event.ToolCallCompletedData{ID: "c2", Name: "ask_user", Output: "b"}),
	))
	if r, _ := s.Run(ctx, "r1"); r.Status != record.RunWaiting || len(r.Requests) != 1 || r.Requests[0] != "tcr_1" {
		t.Fatalf("run with one open request: %+v", r)
	}
	q, err := s.Request(ctx, "apr_1")
	if err != nil || q.Status != record.RequestResolved || q.Decision != event.DecisionAllowOnce || q.By == nil || q.By.Client != "cli" || q.ResolvedAt == nil {
		t.Fatalf("resolved approval: %+v, %v", q, err)
	}
	// A client tool call's result closes its request.
	mustAppend(t, s, o.batch(t,
		ev(t, "r1", event.ToolCallCompleted, event.ToolCallCompletedData{ID: "c3", Name: "pick", Output: "ok", By: &event.By{Client: "ide"}}),
	))
	if r, _ := s.Run(ctx, "r1"); r.Status != record.RunWaiting || len(r.Requests) != 0 {
		t.Fatalf("run after its last answer (waiting until it resumes): %+v", r)
	}
	mustAppend(t, s, o.batch(t, ev(t, "r1", event.RunResumed, event.RunResumedData{Step: 1})))
	if r, _ := s.Run(ctx, "r1"); r.Status != record.RunRunning {
		t.Fatalf("run after run.resumed: %+v", r)
	}
	// A second run waits again and its end cancels what is still open.
	mustAppend(t, s, o.batch(t,
		ev(t, "r1", event.RunCompleted, event.RunEndedData{}),
		ev(t, "r2", event.RunQueued, event.RunQueuedData{Model: "m", Input: event.TextParts("go")}),
		ev(t, "r2", event.RunStarted, event.RunStartedData{Model: "m"}),
		ev(t, "r2", event.ApprovalRequested, event.ApprovalRequestedData{ApprovalID: "apr_2", Step: 1, ToolCall: call("c9", "shell"), Rule: event.Rule{Tool: "*", Action: "ask"}}),
	))
	mustAppend(t, s, o.batch(t, ev(t, "r2", event.RunInterrupted, event.RunEndedData{})))
	if q, _ := s.Request(ctx, "apr_2"); q.Status != record.RequestCancelled {
		t.Fatalf("request of an ended run: %+v", q)
	}
	all, err := s.Requests(ctx, store.ListRequestsParams{SessionID: "s1"})
	if err != nil || len(all) != 4 {
		t.Fatalf("all requests: %+v, %v", all, err)
	}
	if got, _ := s.Requests(ctx, store.ListRequestsParams{RunID: "r2"}); len(got) != 1 {
		t.Fatalf("run r2's requests: %+v", got)
	}
	if _, err := s.Request(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown request: %v", err)
	}
	// The stored records are the log's projection.
	p := record.NewProjection(record.Session{}, nil)
	evs, err := s.Read(ctx, store.ReadParams{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := p.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	var b store.Batch
	b.SetRecords(p.Flush())
	byID := map[string]record.Request{}
	for _, q := range b.Requests {
		byID[q.ID] = q
	}
	for _, q := range all {
		if diff := cmp.Diff(byID[q.ID], q); diff != "" {
			t.Errorf("request %s (-log +stored):\n%s", q.ID, diff)
		}
	}
}
