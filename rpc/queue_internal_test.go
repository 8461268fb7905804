package rpc

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

// The queue admits frames within both bounds, and one frame of any size
// into an empty queue.
func TestQueueBudgetBounds(t *testing.T) {
	q := newQueueBudget(3, 100)
	if !q.tryTake(60) || !q.tryTake(40) {
		t.Fatal("frames within the bounds refused")
	}
	if q.tryTake(1) {
		t.Fatal("a frame beyond the byte bound admitted")
	}
	q.give(60)
	q.give(40)
	if !q.tryTake(1000) {
		t.Fatal("a large frame refused by an empty queue")
	}
	if q.tryTake(1) {
		t.Fatal("a frame admitted behind one over the byte bound")
	}
	q.give(1000)
	for range 3 {
		if !q.tryTake(1) {
			t.Fatal("small frames within the count refused")
		}
	}
	if q.tryTake(1) {
		t.Fatal("a frame beyond the count admitted")
	}
	if n, b := q.queued(); n != 3 || b != 3 {
		t.Fatalf("queued %d frames, %d bytes; want 3, 3", n, b)
	}
}

// Waiters for room all wake when room is given back and take it in
// turn; a cancelled or closed wait gives up without taking any.
func TestQueueBudgetTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueueBudget(10, 100)
		closed := make(chan struct{})
		errClosed := errors.New("closed")
		if err := q.take(context.Background(), 100, closed, errClosed); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 3)
		for range 3 {
			go func() { done <- q.take(context.Background(), 30, closed, errClosed) }()
		}
		synctest.Wait()
		if len(done) != 0 {
			t.Fatal("a waiter took room from a full queue")
		}
		q.give(100)
		for range 3 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if n, b := q.queued(); n != 3 || b != 90 {
			t.Fatalf("queued %d frames, %d bytes; want 3, 90", n, b)
		}

		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- q.take(ctx, 30, closed, errClosed) }()
		go func() { done <- q.take(context.Background(), 30, closed, errClosed) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait: %v", err)
		}
		close(closed)
		if err := <-done; !errors.Is(err, errClosed) {
			t.Fatalf("wait on a closed connection: %v", err)
		}
		if n, b := q.queued(); n != 3 || b != 90 {
			t.Fatalf("after the failed waits: %d frames, %d bytes; want 3, 90", n, b)
		}
	})
}
