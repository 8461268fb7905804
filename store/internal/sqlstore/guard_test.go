package sqlstore

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"weft.dev/weft/store"
)

// Close waits for the calls in, runs its release once, and turns later
// calls away with ErrClosed. (A goroutine blocked on a mutex is not
// durably blocked, so synctest cannot say when Close is waiting; the test
// watches the lock instead: once Close waits for it, no reader gets in.)
func TestGuard(t *testing.T) {
	g := NewGuard("db")
	if err := g.Enter(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	released := 0
	release := func() error {
		mu.Lock()
		defer mu.Unlock()
		released++
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := g.Close(release); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	for g.mu.TryRLock() { // Close is not waiting yet
		g.mu.RUnlock()
		runtime.Gosched()
	}
	mu.Lock()
	if released != 0 {
		t.Error("Close released the database under a call")
	}
	mu.Unlock()
	g.Leave()
	wg.Wait()
	if err := g.Close(release); err != nil || released != 1 {
		t.Fatalf("second Close: %v, released %d times", err, released)
	}
	if err := g.Enter(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Enter after Close = %v, want ErrClosed", err)
	}
}
