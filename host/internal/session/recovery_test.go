package session

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

var errFatal = errors.New("fatal")

// The first attempt runs at once; each retry waits twice as long as the
// last, up to 32 times the first wait, until an attempt succeeds.
func TestRetryBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry{first: time.Second, stop: func(err error) bool { return errors.Is(err, errFatal) }}
		start := time.Now()
		var at []time.Duration
		ok, err := r.run(t.Context(), func(n int) (bool, error) {
			at = append(at, time.Since(start))
			if n < 8 {
				return false, errors.New("disk full")
			}
			return true, nil
		})
		if !ok || err != nil {
			t.Fatalf("run: %v, %v", ok, err)
		}
		want := []time.Duration{0, 1, 3, 7, 15, 31, 63, 95, 127} // waits 1, 2, 4, 8, 16, 32, 32, 32 s
		for i := range want {
			want[i] *= time.Second
		}
		if !slices.Equal(at, want) {
			t.Fatalf("attempts at %v, want %v", at, want)
		}
	})
}

// An error stop accepts ends the loop at once with that error; an attempt
// that succeeds reporting false (the session closed) ends it with false.
func TestRetryStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry{first: time.Second, stop: func(err error) bool { return errors.Is(err, errFatal) }}
		calls := 0
		ok, err := r.run(t.Context(), func(n int) (bool, error) {
			calls++
			if n == 0 {
				return false, errors.New("transient")
			}
			return false, errFatal
		})
		if ok || !errors.Is(err, errFatal) || calls != 2 {
			t.Fatalf("run: %v, %v after %d attempts; want false, the fatal error, 2", ok, err, calls)
		}
		ok, err = r.run(t.Context(), func(int) (bool, error) { return false, nil })
		if ok || err != nil {
			t.Fatalf("run of a closed session: %v, %v", ok, err)
		}
	})
}

// A done context ends the wait between attempts: run returns false, no
// error, and no attempt runs after it.
func TestRetryCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		r := retry{first: time.Minute}
		calls := 0
		time.AfterFunc(90*time.Second, cancel)
		ok, err := r.run(ctx, func(int) (bool, error) {
			calls++
			return false, errors.New("disk full")
		})
		if ok || err != nil || calls != 2 {
			t.Fatalf("run: %v, %v after %d attempts; want false, nil, 2 (at 0 and 1m, cancelled at 1m30s)", ok, err, calls)
		}
	})
}
