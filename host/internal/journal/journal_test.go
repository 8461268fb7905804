package journal_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// countingStore counts transactions and can be made to fail.
type countingStore struct {
	store.Store
	appends atomic.Int64
	fail    atomic.Bool
}

func (c *countingStore) Append(ctx context.Context, b store.Batch) error {
	if c.fail.Load() {
		return errors.New("disk on fire")
	}
	c.appends.Add(1)
	return c.Store.Append(ctx, b)
}

func newJournal(t *testing.T, cfg journal.Config) (*journal.Journal, *countingStore) {
	t.Helper()
	cs := &countingStore{Store: memory.New()}
	// The journal gets no more of the store than its role, so every test
	// that makes its journal here shows that it needs no more.
	cfg.Store = struct{ journal.Store }{cs}
	j, err := journal.Create(context.Background(), cfg, "ses_1", event.SessionCreatedData{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j, cs
}

func readAll(t *testing.T, st store.Store, id string) []event.Event {
	t.Helper()
	var out []event.Event
	var after int64
	for {
		page, err := st.Read(context.Background(), store.ReadParams{SessionID: id, After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out
		}
		after = page[len(page)-1].Seq
	}
}

func runQueued(t *testing.T, id string) event.Event {
	e, err := event.New(id, event.RunQueued, event.RunQueuedData{Model: "m", Input: event.TextParts("hi")})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestConcurrentAppendsAreContiguousAndGrouped(t *testing.T) {
	j, cs := newJournal(t, journal.Config{})
	ctx := context.Background()
	if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
		t.Fatal(err)
	}
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e, _ := event.New("run_1", event.ModelRetry, event.ModelRetryData{Attempt: i})
			evs, err := j.Append(ctx, e, e)
			if err != nil {
				t.Error(err)
				return
			}
			if evs[1].Seq != evs[0].Seq+1 {
				t.Errorf("one append's events are not adjacent: %d, %d", evs[0].Seq, evs[1].Seq)
			}
		})
	}
	wg.Wait()
	evs := readAll(t, cs, "ses_1")
	if len(evs) != 2+2*n {
		t.Fatalf("got %d events, want %d", len(evs), 2+2*n)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	if got := cs.appends.Load(); got >= 2+n {
		t.Logf("no grouping happened: %d transactions for %d appends (allowed, but unusual)", got, 2+n)
	}
	if j.LastSeq() != int64(len(evs)) {
		t.Fatalf("LastSeq %d, want %d", j.LastSeq(), len(evs))
	}
}

func TestDeltasCoalesceWithoutLoss(t *testing.T) {
	j, cs := newJournal(t, journal.Config{CoalesceWindow: time.Hour, CoalesceBytes: 1000})
	ctx := context.Background()
	if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := range 2000 {
		s := fmt.Sprintf("tok%d ", i)
		want.WriteString(s)
		if err := j.Delta(ctx, "run_1", event.MessageDelta, 1, s); err != nil {
			t.Fatal(err)
		}
	}
	// A delta of another step must not be merged into step 1's.
	if err := j.Delta(ctx, "run_1", event.MessageDelta, 2, "next"); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	deltas := 0
	for _, e := range readAll(t, cs, "ses_1") {
		if e.Type != event.MessageDelta {
			continue
		}
		deltas++
		var d event.DeltaData
		if err := e.Decode(&d); err != nil {
			t.Fatal(err)
		}
		if len(d.Text) > 1000 {
			t.Errorf("delta of %d bytes exceeds the 1000-byte cap", len(d.Text))
		}
		if d.Step == 1 {
			got.WriteString(d.Text)
		} else if d.Text != "next" {
			t.Errorf("step 2 delta %q", d.Text)
		}
	}
	if got.String() != want.String() {
		t.Fatalf("coalesced text differs from what was streamed")
	}
	if deltas > want.Len()/1000+3 {
		t.Fatalf("%d delta events for %d bytes: not coalesced", deltas, want.Len())
	}
}

// A lone delta is committed when its window ends, not before, and without
// a Flush: the bubble's clock makes "ends" exact.
func TestDeltaWindowCommitsWithoutFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 5 * time.Millisecond
		j, cs := newJournal(t, journal.Config{CoalesceWindow: window})
		ctx := context.Background()
		if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
			t.Fatal(err)
		}
		if err := j.Delta(ctx, "run_1", event.MessageDelta, 1, "hello"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n, _ := cs.LastSeq(ctx, "ses_1"); n != 2 {
			t.Fatalf("before the window ends: last seq %d, want 2", n)
		}
		time.Sleep(window - time.Nanosecond)
		synctest.Wait()
		if n, _ := cs.LastSeq(ctx, "ses_1"); n != 2 {
			t.Fatalf("just before the window ends: last seq %d, want 2", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n, _ := cs.LastSeq(ctx, "ses_1"); n != 3 {
			t.Fatalf("after the window: last seq %d, want 3: a lone delta was not committed", n)
		}
	})
}

// TestSubscribeWhileAppending is the property that the subscriber sees
// exactly the log: replay then live, no gap, no duplicate.
func TestSubscribeWhileAppending(t *testing.T) {
	j, cs := newJournal(t, journal.Config{CoalesceWindow: time.Millisecond})
	ctx := context.Background()
	if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
		t.Fatal(err)
	}
	const total = 3000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range total {
			if i%3 == 0 {
				j.Delta(ctx, "run_1", event.MessageDelta, i, "x")
				continue
			}
			e, _ := event.New("run_1", event.ModelRetry, event.ModelRetryData{Attempt: i})
			if _, err := j.Append(ctx, e); err != nil {
				t.Error(err)
				return
			}
		}
		j.Flush(ctx)
	}()
	for k := range 8 {
		after := int64(k % 2) // from the start, and from a cursor
		sctx, cancel := context.WithCancel(ctx)
		var got []int64
		for e, err := range j.Events(sctx, after, journal.SubscribeOptions{Buffer: 1 << 16}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, e.Seq)
			if e.Seq == int64(total+2) {
				break
			}
		}
		cancel()
		for i, s := range got {
			if s != after+int64(i)+1 {
				t.Fatalf("subscriber %d: position %d has seq %d, want %d", k, i, s, after+int64(i)+1)
			}
		}
		if k == 0 {
			<-done
		}
	}
	if n := len(readAll(t, cs, "ses_1")); n != total+2 {
		t.Fatalf("log has %d events, want %d", n, total+2)
	}
}

// A subscriber that falls behind by more than its buffer ends with
// ErrLagged, and its queue is dropped at once so that a stalled reader
// holds no memory.
func TestLaggedSubscriberIsClosed(t *testing.T) {
	for _, opts := range []journal.SubscribeOptions{{Buffer: 4}, {Bytes: 1 << 10}} {
		synctest.Test(t, func(t *testing.T) {
			j, _ := newJournal(t, journal.Config{})
			ctx := context.Background()
			if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
				t.Fatal(err)
			}
			next, stop := iterPull(j.Events(ctx, j.LastSeq(), opts))
			defer stop()
			// Register the subscriber by pulling once in the background.
			first := make(chan error, 1)
			go func() { _, err, _ := next(); first <- err }()
			synctest.Wait()
			for i := range 20 {
				e, _ := event.New("run_1", event.ModelRetry, event.ModelRetryData{Attempt: i, Error: strings.Repeat("x", 200)})
				if _, err := j.Append(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			err := <-first
			for err == nil {
				var ok bool
				if _, err, ok = next(); !ok {
					t.Fatal("iterator ended without ErrLagged")
				}
			}
			if !errors.Is(err, journal.ErrLagged) {
				t.Fatalf("%+v: got %v, want ErrLagged", opts, err)
			}
		})
	}
}

func TestCursorBeyondLog(t *testing.T) {
	j, _ := newJournal(t, journal.Config{})
	for _, err := range j.Events(context.Background(), 99, journal.SubscribeOptions{}) {
		if !errors.Is(err, journal.ErrCursor) {
			t.Fatalf("got %v, want ErrCursor", err)
		}
	}
}

func TestStoreFailureIsStickyAndProjectionMatchesStore(t *testing.T) {
	j, cs := newJournal(t, journal.Config{})
	ctx := context.Background()
	cs.fail.Store(true)
	if _, err := j.Append(ctx, runQueued(t, "run_1")); err == nil {
		t.Fatal("append succeeded on a failing store")
	}
	cs.fail.Store(false)
	if _, err := j.Append(ctx, runQueued(t, "run_2")); err == nil {
		t.Fatal("a journal that failed accepted more writes")
	}
	if _, ok := j.Run("run_1"); ok {
		t.Fatal("the projection kept a run that was never stored")
	}
	if j.Session().LastSeq != 1 {
		t.Fatalf("projection last seq %d, want 1", j.Session().LastSeq)
	}
}

func TestClosedJournal(t *testing.T) {
	j, _ := newJournal(t, journal.Config{})
	j.Close()
	if _, err := j.Append(context.Background(), runQueued(t, "r")); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
}

// blockingStore holds every append until released.
type blockingStore struct {
	store.Store
	entered, release chan struct{}
}

func (b *blockingStore) Append(ctx context.Context, batch store.Batch) error {
	b.entered <- struct{}{}
	<-b.release
	return b.Store.Append(ctx, batch)
}

// An append whose ctx ends after the writer took it answers with the
// commit's outcome, not with ctx's error: the caller must not take an
// append that commits for one that did not (found by the torture test: a
// cancelled run left its tool calls started and never completed).
func TestAppendOutcomeSurvivesCancel(t *testing.T) {
	bs := &blockingStore{Store: memory.New(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	close(bs.release)
	j, err := journal.Create(context.Background(), journal.Config{Store: bs}, "ses_1", event.SessionCreatedData{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	<-bs.entered
	bs.release = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := j.Append(ctx, runQueued(t, "run_1"))
		done <- err
	}()
	<-bs.entered // the writer has the append
	cancel()
	close(bs.release)
	if err := <-done; err != nil {
		t.Fatalf("append committed, but returned %v", err)
	}
	if _, ok := j.Run("run_1"); !ok {
		t.Fatal("the run is not in the projection")
	}
}

// A parked journal's writer stops, and the next write starts it again:
// appends and deltas commit and reach a subscriber as before, and Close
// ends the subscriptions of a parked journal.
func TestParkedJournalWritesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		j, err := journal.Create(ctx, journal.Config{Store: memory.New(), CoalesceWindow: time.Millisecond}, "s1", event.SessionCreatedData{})
		if err != nil {
			t.Fatal(err)
		}
		events := j.Events(ctx, 0, journal.SubscribeOptions{})
		next, stop := iter.Pull2(events)
		defer stop()
		var seen int64
		seqs := func(n int) {
			t.Helper()
			for range n {
				e, err, ok := next()
				if !ok || err != nil {
					t.Fatalf("subscription: %v %v", ok, err)
				}
				if seen++; e.Seq != seen {
					t.Fatalf("seq %d, want %d", e.Seq, seen)
				}
			}
		}
		if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
			t.Fatal(err)
		}
		seqs(2)
		for i := range 3 {
			j.Park()
			synctest.Wait()
			if journal.Running(j) {
				t.Fatal("an idle journal's writer runs after Park")
			}
			if _, err := j.Append(ctx, event.Event{Type: "x.test", Data: []byte(`{}`)}); err != nil {
				t.Fatalf("append %d after park: %v", i, err)
			}
			seqs(1)
			j.Park()
			synctest.Wait()
			if err := j.Delta(ctx, "run_1", event.MessageDelta, 1, "hello"); err != nil {
				t.Fatal(err)
			}
			j.Park() // a pending delta keeps the writer: it commits in its window
			synctest.Wait()
			if !journal.Running(j) {
				t.Fatal("Park stopped the writer of a pending delta")
			}
			time.Sleep(10 * time.Millisecond)
			seqs(1)
		}
		if got := j.LastSeq(); got != 8 {
			t.Fatalf("last seq %d, want 8", got)
		}
		j.Park()
		synctest.Wait()
		j.Close()
		if _, err, ok := next(); ok && err == nil {
			t.Fatal("subscription went on after Close")
		}
		if _, err := j.Append(ctx, event.Event{Type: "x.test", Data: []byte(`{}`)}); !errors.Is(err, journal.ErrClosed) {
			t.Fatalf("append after close: %v", err)
		}
	})
}
