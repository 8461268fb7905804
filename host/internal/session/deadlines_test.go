package session

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// expired records the IDs a deadlines expired, and when.
type expired struct {
	mu  sync.Mutex
	ids []string
	at  []time.Time
}

func (e *expired) expire(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ids, e.at = append(e.ids, id), append(e.at, time.Now())
}

func (e *expired) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ids)
}

// Each request expires once, at its deadline, and its timer is gone then;
// a second start keeps the first deadline; one already past expires at once.
func TestDeadlinesExpireOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e expired
		d := newDeadlines(e.expire)
		t0 := time.Now()
		d.start("apr_1", t0.Add(time.Minute))
		d.start("apr_1", t0.Add(time.Second)) // kept: the first deadline
		d.start("inp_1", t0.Add(-time.Second))
		synctest.Wait()
		if got := e.got(); !slices.Equal(got, []string{"inp_1"}) {
			t.Fatalf("expired at once: %v, want the past deadline's only", got)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := e.got(); !slices.Equal(got, []string{"inp_1", "apr_1"}) || e.at[1].Sub(t0) != time.Minute {
			t.Fatalf("expired %v at %v, want apr_1 at its first deadline, 1m", got, e.at)
		}
		if n := d.len(); n != 0 {
			t.Fatalf("%d timers left after they fired", n)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := e.got(); len(got) != 2 {
			t.Fatalf("expired again: %v", got)
		}
	})
}

// A stopped timer never fires; stopAll stops them all and refuses new ones.
func TestDeadlinesStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e expired
		d := newDeadlines(e.expire)
		d.start("apr_1", time.Now().Add(time.Second))
		d.start("apr_2", time.Now().Add(time.Second))
		d.start("apr_3", time.Now().Add(time.Second))
		d.stop("apr_1")
		d.stop("apr_9") // none: nothing happens
		if n := d.len(); n != 2 {
			t.Fatalf("%d timers pending, want 2", n)
		}
		d.stopAll()
		d.start("apr_4", time.Now().Add(time.Second))
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := e.got(); len(got) != 0 {
			t.Fatalf("expired %v after stop and stopAll", got)
		}
		if n := d.len(); n != 0 {
			t.Fatalf("%d timers pending after stopAll", n)
		}
	})
}
