package rpc

import (
	"context"
	"sync"
)

// queueBudget bounds the notifications queued on one connection, in
// number and in bytes, so that a client that reads slowly pins a bounded
// amount of memory whatever the size of its events. A notifier takes room
// before it queues a frame; the connection's writer gives the room back
// once it has taken the frame off the queue. One frame is always
// admitted into an empty queue, however large, so that an event bigger
// than the byte bound still goes out (alone).
type queueBudget struct {
	maxFrames int64
	maxBytes  int64

	mu     sync.Mutex
	frames int64
	bytes  int64
	// room, when not nil, is closed at the next give: notifiers wait on
	// it. It is made only while someone waits, so a give costs no
	// allocation otherwise.
	room chan struct{}
}

func newQueueBudget(frames, bytes int) *queueBudget {
	return &queueBudget{maxFrames: int64(frames), maxBytes: int64(bytes)}
}

// fits reports whether a frame of n bytes may join the queue.
func (q *queueBudget) fits(n int) bool {
	return q.frames == 0 || (q.frames+1 <= q.maxFrames && q.bytes+int64(n) <= q.maxBytes)
}

// tryTake takes room for a frame of n bytes, or reports false when the
// queue is full.
func (q *queueBudget) tryTake(n int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.fits(n) {
		return false
	}
	q.frames++
	q.bytes += int64(n)
	return true
}

// take waits for room for a frame of n bytes. It returns ctx's error, or
// errClosed once closed is closed.
func (q *queueBudget) take(ctx context.Context, n int, closed <-chan struct{}, errClosed error) error {
	for {
		q.mu.Lock()
		if q.fits(n) {
			q.frames++
			q.bytes += int64(n)
			q.mu.Unlock()
			return nil
		}
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
		case <-closed:
			return errClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// give returns the room of a frame of n bytes and wakes the waiters.
func (q *queueBudget) give(n int) { q.giveFrames(1, n) }

// giveFrames returns the room of frames frames of n bytes in all and
// wakes the waiters.
func (q *queueBudget) giveFrames(frames, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.frames -= int64(frames)
	q.bytes -= int64(n)
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
}

// queued returns the frames and bytes queued now.
func (q *queueBudget) queued() (frames, bytes int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.frames, q.bytes
}
