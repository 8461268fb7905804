package journal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
)

func retry(t *testing.T, attempt int, text string) event.Event {
	t.Helper()
	e, err := event.New("run_1", event.ModelRetry, event.ModelRetryData{Attempt: attempt, Error: text})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Subscribers that read at different speeds all see the same sequence,
// the log's, whatever the number of commits each wake coalesces.
func TestSubscribersAtDifferentSpeedsSeeTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, cs := newJournal(t, journal.Config{WakeSpacing: 50 * time.Microsecond})
		ctx := context.Background()
		if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
			t.Fatal(err)
		}
		const subs, total = 40, 1500
		start := j.LastSeq()
		end := start + total
		got := make([][]int64, subs)
		var wg sync.WaitGroup
		for k := range subs {
			seq := j.Events(ctx, start, journal.SubscribeOptions{Buffer: 1 << 16, Bytes: 64 << 20})
			wg.Go(func() {
				for e, err := range seq {
					if err != nil {
						t.Errorf("subscriber %d: %v", k, err)
						return
					}
					got[k] = append(got[k], e.Seq)
					// Subscriber k pauses every k-th event: the fast ones
					// wake at every commit, the slow ones take many at once.
					if k > 0 && e.Seq%int64(k) == 0 {
						time.Sleep(time.Duration(k) * 100 * time.Microsecond)
					}
					if e.Seq == end {
						return
					}
				}
			})
		}
		synctest.Wait() // every subscriber is registered and waiting
		for i := 0; i < total; {
			// Batches of 1 to 7 events, deltas among them, and pauses.
			n := min(1+i%7, total-i)
			if i%5 == 0 {
				if err := j.Delta(ctx, "run_1", event.MessageDelta, i, "tok"); err != nil {
					t.Fatal(err)
				}
				if err := j.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				i++
				continue
			}
			evs := make([]event.Event, n)
			for k := range evs {
				evs[k] = retry(t, i+k, "")
			}
			if _, err := j.Append(ctx, evs...); err != nil {
				t.Fatal(err)
			}
			i += n
			if i%11 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		wg.Wait()
		var want []int64
		for _, e := range readAll(t, cs, "ses_1") {
			if e.Seq > start {
				want = append(want, e.Seq)
			}
		}
		if int64(len(want)) != total {
			t.Fatalf("log has %d events after %d, want %d", len(want), start, total)
		}
		for k := range subs {
			if fmt.Sprint(got[k]) != fmt.Sprint(want) {
				t.Fatalf("subscriber %d saw %d events, not the log's %d (first %v)", k, len(got[k]), len(want), got[k][:min(5, len(got[k]))])
			}
		}
	})
}

// A subscriber that stops reading is dropped once its backlog is over its
// byte bound, without reading again, while the others read on; when it
// reads again it gets what it had taken, then ErrLagged.
func TestStalledSubscriberIsDroppedAtTheByteBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, _ := newJournal(t, journal.Config{})
		ctx := context.Background()
		if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
			t.Fatal(err)
		}
		start := j.LastSeq()
		const bound = 16 << 10
		next, stop := iterPull(j.Events(ctx, start, journal.SubscribeOptions{Bytes: bound}))
		defer stop()
		first := make(chan int64, 1)
		go func() { e, _, _ := next(); first <- e.Seq }()

		var (
			wg   sync.WaitGroup
			seen []int64
		)
		fast := j.Events(ctx, start, journal.SubscribeOptions{Bytes: bound})
		wg.Go(func() {
			for e, err := range fast {
				if err != nil {
					t.Errorf("the reading subscriber: %v", err)
					return
				}
				seen = append(seen, e.Seq)
				if e.Seq == start+64 {
					return
				}
			}
		})
		synctest.Wait()
		if n := j.Subscribers(); n != 2 {
			t.Fatalf("%d subscribers, want 2", n)
		}
		// 64 events of about 1 KiB each, one commit every 2 ms (the wake
		// interval is 1 ms): the stalled subscriber takes the first and
		// then reads no more; the other keeps up.
		text := strings.Repeat("x", 1<<10)
		for i := range 64 {
			if _, err := j.Append(ctx, retry(t, i, text)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
		}
		wg.Wait()
		if len(seen) != 64 {
			t.Fatalf("the reading subscriber saw %d events, want 64", len(seen))
		}
		if n := j.Subscribers(); n != 0 {
			t.Fatalf("%d subscribers left; the stalled one was not dropped", n)
		}
		if s := <-first; s != start+1 {
			t.Fatalf("first event %d, want %d", s, start+1)
		}
		var err error
		for err == nil {
			var ok bool
			if _, err, ok = next(); !ok {
				t.Fatal("iterator ended without ErrLagged")
			}
		}
		if !errors.Is(err, journal.ErrLagged) {
			t.Fatalf("got %v, want ErrLagged", err)
		}
	})
}

// discardStore accepts every append and keeps nothing, so that what a
// test's heap holds is the journal's.
type discardStore struct{ store.Store }

func (discardStore) Append(context.Context, store.Batch) error { return nil }

// A subscriber that never reads again keeps at most about its byte bound
// of the log alive, however much is committed after it stalled.
func TestStalledSubscriberMemoryIsBounded(t *testing.T) {
	j, err := journal.Create(context.Background(), journal.Config{Store: discardStore{}}, "ses_1", event.SessionCreatedData{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
		t.Fatal(err)
	}
	const bound = 512 << 10
	next, stop := iterPull(j.Events(ctx, j.LastSeq(), journal.SubscribeOptions{Bytes: bound}))
	defer stop()
	// The first pull registers the subscription and returns the first
	// event; nothing pulls again.
	pulled := make(chan struct{})
	go func() {
		defer close(pulled)
		next()
	}()
	defer func() { <-pulled }() // before stop
	for j.Subscribers() == 0 {
		runtime.Gosched()
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	// 16 MiB in 64 commits of 16 events of 16 KiB.
	data := []byte(`{"attempt":1,"error":"` + strings.Repeat("y", 16<<10) + `"}`)
	for range 64 {
		evs := make([]event.Event, 16)
		for k := range evs {
			evs[k] = event.Event{RunID: "run_1", Type: event.ModelRetry, Data: bytes.Clone(data)}
		}
		if _, err := j.Append(ctx, evs...); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	if grew := int64(after) - int64(before); grew > 4*bound {
		t.Fatalf("the heap grew by %d bytes while a subscriber stalled; bound %d", grew, bound)
	}
	if n := j.Subscribers(); n != 0 {
		t.Fatalf("%d subscribers; the stalled one was not dropped", n)
	}
}

// Closing the journal ends every subscriber after what was committed
// before the close, and a failed write ends them with the failure.
func TestSubscribersEndOnCloseAndFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, cs := newJournal(t, journal.Config{WakeSpacing: time.Hour})
		ctx := context.Background()
		if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		results := make([]error, 3)
		counts := make([]int, 3)
		for k := range results {
			seq := j.Events(ctx, j.LastSeq(), journal.SubscribeOptions{})
			wg.Go(func() {
				for _, err := range seq {
					if err != nil {
						results[k] = err
						return
					}
					counts[k]++
				}
			})
		}
		synctest.Wait()
		// No time passes: these wait for the wake due in 10 ms, and
		// the close comes first.
		for i := range 3 {
			if _, err := j.Append(ctx, retry(t, i, "")); err != nil {
				t.Fatal(err)
			}
		}
		j.Close()
		wg.Wait()
		for k, err := range results {
			if !errors.Is(err, journal.ErrClosed) || counts[k] != 3 {
				t.Fatalf("subscriber %d: %d events then %v, want 3 then ErrClosed", k, counts[k], err)
			}
		}

		j2, err := journal.Open(ctx, journal.Config{Store: cs}, "ses_1")
		if err != nil {
			t.Fatal(err)
		}
		defer j2.Close()
		var serr error
		seq := j2.Events(ctx, j2.LastSeq(), journal.SubscribeOptions{})
		wg.Go(func() {
			for _, err := range seq {
				if err != nil {
					serr = err
					return
				}
			}
		})
		synctest.Wait()
		cs.fail.Store(true)
		if _, err := j2.Append(ctx, retry(t, 9, "")); err == nil {
			t.Fatal("append succeeded on a failing store")
		}
		wg.Wait()
		if serr == nil || errors.Is(serr, journal.ErrClosed) {
			t.Fatalf("subscriber ended with %v, want the write failure", serr)
		}
		for _, err := range j2.Events(ctx, 0, journal.SubscribeOptions{}) {
			if err == nil || errors.Is(err, journal.ErrClosed) {
				t.Fatalf("a subscription to a failed journal got %v, want the write failure", err)
			}
			break
		}
	})
}

// A batch committed after a quiet spell reaches subscribers at once; one
// committed within n × WakeSpacing of the last wake (n subscribers, at
// most 10 ms) waits for the rest of that interval.
func TestWakeSpacing(t *testing.T) {
	for _, tc := range []struct {
		spacing  time.Duration
		subs     int
		interval time.Duration
	}{
		{2 * time.Millisecond, 1, 2 * time.Millisecond},
		{2 * time.Millisecond, 3, 6 * time.Millisecond},
		{time.Hour, 2, 10 * time.Millisecond},
	} {
		synctest.Test(t, func(t *testing.T) {
			j, _ := newJournal(t, journal.Config{WakeSpacing: tc.spacing})
			ctx := context.Background()
			if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
				t.Fatal(err)
			}
			got := make([][]time.Duration, tc.subs)
			var wg sync.WaitGroup
			for k := range got {
				seq := j.Events(ctx, j.LastSeq(), journal.SubscribeOptions{})
				wg.Go(func() {
					t0 := time.Now()
					for _, err := range seq {
						if err != nil {
							return
						}
						got[k] = append(got[k], time.Since(t0))
						if len(got[k]) == 3 {
							return
						}
					}
				})
			}
			synctest.Wait()
			for i := range 3 {
				if _, err := j.Append(ctx, retry(t, i, "")); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					synctest.Wait()
				}
				// Half a millisecond, so that the last append comes
				// before the owed wake (at 2 ms at the earliest), not
				// at the same instant, where their order is unspecified.
				time.Sleep(time.Millisecond / 2)
			}
			wg.Wait()
			// The first batch at once, the next two at the end of the interval.
			want := fmt.Sprint([]time.Duration{0, tc.interval, tc.interval})
			for k := range got {
				if fmt.Sprint(got[k]) != want {
					t.Fatalf("%+v: subscriber %d received at %v, want %v", tc, k, got[k], want)
				}
			}
		})
	}
}

// Each subscriber adds its own spacing to the wakes': WakeSpacing for
// Events, EncodedWakeSpacing for EncodedEvents (whose consumers write
// each wake to a connection), and a subscriber that leaves takes its
// share with it.
func TestEncodedWakeSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, _ := newJournal(t, journal.Config{WakeSpacing: 2 * time.Millisecond, EncodedWakeSpacing: 3 * time.Millisecond})
		ctx := context.Background()
		if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
			t.Fatal(err)
		}
		// appendThree appends three batches half a millisecond apart,
		// the first after a quiet spell, and returns when each of the
		// events' subscribers got them, relative to the first append.
		appendThree := func(t *testing.T, subs int, seqs func(k int, t0 *time.Time, got *[]time.Duration, wg *sync.WaitGroup)) [][]time.Duration {
			got := make([][]time.Duration, subs)
			var wg sync.WaitGroup
			t0 := time.Now().Add(time.Hour) // set below, before the first append
			for k := range got {
				seqs(k, &t0, &got[k], &wg)
			}
			synctest.Wait()
			time.Sleep(20 * time.Millisecond) // a quiet spell
			t0 = time.Now()
			for i := range 3 {
				if _, err := j.Append(ctx, retry(t, i, "")); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					synctest.Wait()
				}
				time.Sleep(time.Millisecond / 2)
			}
			wg.Wait()
			return got
		}
		events := func(k int, t0 *time.Time, got *[]time.Duration, wg *sync.WaitGroup) {
			seq := j.Events(ctx, j.LastSeq(), journal.SubscribeOptions{})
			wg.Go(func() {
				for _, err := range seq {
					if err != nil {
						return
					}
					*got = append(*got, time.Since(*t0))
					if len(*got) == 3 {
						return
					}
				}
			})
		}
		encoded := func(k int, t0 *time.Time, got *[]time.Duration, wg *sync.WaitGroup) {
			seq := j.EncodedEvents(ctx, j.LastSeq(), journal.SubscribeOptions{})
			wg.Go(func() {
				for evs, err := range seq {
					if err != nil {
						return
					}
					for range evs {
						*got = append(*got, time.Since(*t0))
					}
					if len(*got) == 3 {
						return
					}
				}
			})
		}
		// One of each: wakes at most every 2 + 3 ms. (The appends end
		// at 1 ms, before any owed wake, not at the same instant.)
		got := appendThree(t, 2, func(k int, t0 *time.Time, g *[]time.Duration, wg *sync.WaitGroup) {
			if k == 0 {
				events(k, t0, g, wg)
			} else {
				encoded(k, t0, g, wg)
			}
		})
		want := fmt.Sprint([]time.Duration{0, 5 * time.Millisecond, 5 * time.Millisecond})
		for k := range got {
			if fmt.Sprint(got[k]) != want {
				t.Fatalf("with an encoded subscriber, subscriber %d received at %v, want %v", k, got[k], want)
			}
		}
		// Both have left: one Events subscriber alone wakes every 2 ms.
		got = appendThree(t, 1, events)
		if want := fmt.Sprint([]time.Duration{0, 2 * time.Millisecond, 2 * time.Millisecond}); fmt.Sprint(got[0]) != want {
			t.Fatalf("after the encoded subscriber left, received at %v, want %v", got[0], want)
		}
	})
}

// EncodedEvents yields each event with exactly json.Marshal's encoding,
// replayed or live, and live events are encoded once for all subscribers.
func TestEncodedEventsAreSharedAndExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, _ := newJournal(t, journal.Config{})
		ctx := context.Background()
		if _, err := j.Append(ctx, runQueued(t, "run_1"), retry(t, 1, "<b>&amp;</b> \u2028")); err != nil {
			t.Fatal(err)
		}
		replayed := j.LastSeq()
		seen := make([][]event.Encoded, 2)
		var wg sync.WaitGroup
		for k := range seen {
			seq := j.EncodedEvents(ctx, 0, journal.SubscribeOptions{})
			wg.Go(func() {
				for evs, err := range seq {
					if err != nil {
						t.Error(err)
						return
					}
					seen[k] = append(seen[k], evs...)
					if evs[len(evs)-1].Event.Seq == replayed+2 {
						return
					}
				}
			})
		}
		synctest.Wait()
		if _, err := j.Append(ctx, retry(t, 2, "<live>"), retry(t, 3, "")); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for k, evs := range seen {
			if int64(len(evs)) != replayed+2 {
				t.Fatalf("subscriber %d saw %d events, want %d", k, len(evs), replayed+2)
			}
			for i, e := range evs {
				want, err := json.Marshal(e.Event)
				if err != nil {
					t.Fatal(err)
				}
				// A replayed event comes without an encoding, for its
				// consumer to make; a live one with the shared one.
				if int64(i) < replayed && e.JSON != nil {
					t.Fatalf("replayed seq %d came encoded", e.Event.Seq)
				}
				if int64(i) >= replayed && e.JSON == nil {
					t.Fatalf("live seq %d came without its encoding", e.Event.Seq)
				}
				got, err := e.Bytes()
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Fatalf("seq %d: encoded\n%s\nwant\n%s", e.Event.Seq, got, want)
				}
			}
		}
		for i := replayed; i < replayed+2; i++ {
			if &seen[0][i].JSON[0] != &seen[1][i].JSON[0] {
				t.Fatalf("live seq %d was encoded once per subscriber", i+1)
			}
		}
	})
}

// pausingStore commits a batch and then, when armed, waits for release
// before it answers: the window in which the store holds a batch the
// journal has not published yet.
type pausingStore struct {
	store.Store
	armed     atomic.Bool
	committed chan int64 // the last seq of the held batch
	release   chan struct{}
}

func (p *pausingStore) Append(ctx context.Context, b store.Batch) error {
	if err := p.Store.Append(ctx, b); err != nil {
		return err
	}
	if p.armed.CompareAndSwap(true, false) {
		p.committed <- b.Events[len(b.Events)-1].Seq
		<-p.release
	}
	return nil
}

// A cursor the store has reached is good before the journal publishes
// it (a reader of a run's record can be ahead of the feed), and the
// subscription then yields only what follows it; a cursor beyond the
// store is refused.
func TestCursorCommittedButNotYetPublished(t *testing.T) {
	ps := &pausingStore{Store: memory.New(), committed: make(chan int64, 1), release: make(chan struct{})}
	j, err := journal.Create(context.Background(), journal.Config{Store: ps}, "ses_1", event.SessionCreatedData{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
		t.Fatal(err)
	}
	ps.armed.Store(true)
	appended := make(chan error, 1)
	go func() {
		_, err := j.Append(ctx, retry(t, 1, "a"), retry(t, 2, "b"))
		appended <- err
	}()
	held := <-ps.committed // seqs held-1 and held are durable, not published
	if last := j.LastSeq(); last >= held {
		t.Fatalf("the journal's last seq is %d before the publish of %d", last, held)
	}
	for _, err := range j.Events(ctx, held+1, journal.SubscribeOptions{}) {
		if !errors.Is(err, journal.ErrCursor) {
			t.Fatalf("a cursor beyond the store: %v, want ErrCursor", err)
		}
		break
	}
	wants := map[int64][]int64{held - 1: {held, held + 1}, held: {held + 1}}
	type result struct {
		after int64
		seqs  []int64
		err   error
	}
	results := make(chan result, len(wants))
	for after, want := range wants {
		go func() {
			r := result{after: after}
			for e, err := range j.Events(ctx, after, journal.SubscribeOptions{}) {
				if err != nil {
					r.err = err
					break
				}
				if r.seqs = append(r.seqs, e.Seq); len(r.seqs) == len(want) {
					break
				}
			}
			results <- r
		}()
	}
	for j.Subscribers() < len(wants) && len(results) == 0 {
		runtime.Gosched() // until both follow the feed, or one failed
	}
	close(ps.release)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, retry(t, 3, "c")); err != nil {
		t.Fatal(err)
	}
	for range wants {
		r := <-results
		if r.err != nil || !slices.Equal(r.seqs, wants[r.after]) {
			t.Errorf("after %d: seqs %v (%v), want %v", r.after, r.seqs, r.err, wants[r.after])
		}
	}
}
