package session

import "testing"

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A tracked run's channel closes when it settles, once; tracking it again
// keeps the channel its waiters hold; an untracked run has none.
func TestRunWaitsSettle(t *testing.T) {
	var w runWaits
	if w.chanOf("run_1") != nil {
		t.Fatal("an untracked run has a channel")
	}
	w.track("run_1")
	ch := w.chanOf("run_1")
	w.track("run_1")
	if w.chanOf("run_1") != ch {
		t.Fatal("tracking a run again replaced its channel")
	}
	if closed(ch) {
		t.Fatal("closed before it settled")
	}
	w.settle("run_1")
	w.settle("run_1") // settled: nothing happens
	if !closed(ch) || w.chanOf("run_1") != nil {
		t.Fatal("settle did not close and forget the channel")
	}
	w.track("run_2")
	ch2 := w.chanOf("run_2")
	w.untrack("run_2")
	if closed(ch2) || w.chanOf("run_2") != nil {
		t.Fatal("untrack closed the channel, or kept it")
	}
}

// settleAllBut settles the runs the session no longer holds, and only them.
func TestRunWaitsSettleAllBut(t *testing.T) {
	var w runWaits
	chs := map[string]<-chan struct{}{}
	for _, id := range []string{"run_1", "run_2", "run_3"} {
		w.track(id)
		chs[id] = w.chanOf(id)
	}
	w.settleAllBut(map[string]bool{"run_2": true})
	for id, want := range map[string]bool{"run_1": true, "run_2": false, "run_3": true} {
		if closed(chs[id]) != want {
			t.Errorf("%s: closed %v, want %v", id, !want, want)
		}
	}
	if w.chanOf("run_2") == nil {
		t.Fatal("the held run lost its channel")
	}
}
