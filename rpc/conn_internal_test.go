package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/jsonrpc"
)

// batchStream is a jsonrpc.Stream and BatchWriter that records how each
// frame was written: "w:<frame>" for Write, "b:<frame>,<frame>…" for
// WriteBatch, a frame longer than 20 bytes as its length.
type batchStream struct {
	mu     sync.Mutex
	calls  []string
	frames [][]byte // a copy of every frame written
	fail   error
}

func short(f []byte) string {
	if len(f) > 20 {
		return fmt.Sprint(len(f))
	}
	return string(f)
}

func (s *batchStream) Read(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *batchStream) Write(_ context.Context, f []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "w:"+short(f))
	s.frames = append(s.frames, slices.Clone(f))
	return s.fail
}

func (s *batchStream) WriteBatch(_ context.Context, fs [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, f := range fs {
		names = append(names, short(f))
		s.frames = append(s.frames, slices.Clone(f))
	}
	s.calls = append(s.calls, "b:"+strings.Join(names, ","))
	return s.fail
}

func (s *batchStream) Close() error { return nil }

var _ jsonrpc.BatchWriter = (*batchStream)(nil)

// runWriter queues frames on a connection over bs, lets its writer drain
// them and returns what bs saw and how many notifications are still
// counted as queued.
func runWriter(bs *batchStream, frames ...[]byte) ([]string, int64) {
	s := NewServer(Config{NotifyQueue: 1000, NotifyBytes: 1 << 30})
	c := s.newConn(context.Background(), TransportWebSocket, bs)
	defer c.cancel()
	for _, f := range frames {
		if !c.queue.tryTake(len(f)) {
			panic("queue full")
		}
		c.out <- wholeFrame(f, true)
	}
	close(c.stopWriting)
	c.writeLoop()
	n, _ := c.queue.queued()
	return bs.calls, n
}

// The writer sends what is queued in batches within their bounds; a lone
// frame, and one larger than a batch may be, go by themselves.
func TestWriterBatches(t *testing.T) {
	small := func(i int) []byte { return fmt.Appendf(nil, "%d", i) }
	big := make([]byte, maxBatchBytes+1)
	half := make([]byte, maxBatchBytes/2)
	var many [][]byte
	for i := range maxBatchFrames + 2 {
		many = append(many, small(i))
	}
	for _, tc := range []struct {
		name   string
		frames [][]byte
		want   []string
	}{
		{"lone", [][]byte{small(1)}, []string{"w:1"}},
		{"several", [][]byte{small(1), small(2), small(3)}, []string{"b:1,2,3"}},
		{"oversized", [][]byte{small(1), small(2), big, small(3), small(4)},
			[]string{"b:1,2", fmt.Sprintf("w:%d", len(big)), "b:3,4"}},
		{"oversized alone", [][]byte{big, small(1)}, []string{fmt.Sprintf("w:%d", len(big)), "w:1"}},
		{"bytes", [][]byte{half, half, half, small(1)},
			[]string{fmt.Sprintf("b:%d,%d", len(half), len(half)), fmt.Sprintf("b:%d,1", len(half))}},
		{"count", many, []string{
			"b:" + strings.Join(func() (s []string) {
				for _, f := range many[:maxBatchFrames] {
					s = append(s, string(f))
				}
				return s
			}(), ","),
			fmt.Sprintf("b:%d,%d", maxBatchFrames, maxBatchFrames+1),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, queued := runWriter(&batchStream{}, tc.frames...)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if queued != 0 {
				t.Errorf("%d notifications still counted as queued", queued)
			}
		})
	}
}

// A failed write stops the writer and ends the connection, with the frame
// it had taken for the next batch no longer counted as queued.
func TestWriterStopsOnError(t *testing.T) {
	bs := &batchStream{fail: errors.New("gone")}
	big := make([]byte, maxBatchBytes)
	got, queued := runWriter(bs, []byte("1"), []byte("2"), big, []byte("3"))
	if want := []string{"b:1,2"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if queued != 1 { // "3", left in the queue
		t.Errorf("%d notifications counted as queued, want 1", queued)
	}
}

// A subscription's live events, queued in runs over their shared
// encoding, reach the client byte for byte as the per-subscriber
// encoding of each event (eventFrame of the event alone) wrote them, in
// order, whether or not a run fits in the connection's queue at once;
// and each parses as the events/event notification of its event.
func TestNotifyEventsAsEncodedOneByOne(t *testing.T) {
	for _, queue := range []int{1, 3, 1000} {
		t.Run(fmt.Sprintf("queue=%d", queue), func(t *testing.T) {
			bs := &batchStream{}
			s := NewServer(Config{NotifyQueue: queue, NotifyBytes: 1 << 20})
			c := s.newConn(context.Background(), TransportWebSocket, bs)
			defer c.cancel()
			go c.writeLoop()

			var evs []event.Encoded
			t0 := time.Date(2026, 12, 2, 12, 0, 0, 123456789, time.UTC)
			for i := range 40 {
				e, err := event.New("run_1", event.MessageDelta, event.DeltaData{Step: 1, Text: fmt.Sprintf("<%d> & \u2028 \"ü\"\n%s", i, strings.Repeat("x", i*97))})
				if err != nil {
					t.Fatal(err)
				}
				e.Seq, e.SessionID, e.Time = int64(i+1), "ses_1", t0.Add(time.Duration(i)*time.Millisecond)
				b, err := e.AppendJSON(nil)
				if err != nil {
					t.Fatal(err)
				}
				evs = append(evs, event.Encoded{Event: e, JSON: b})
			}
			prefix := eventFramePrefix("sub_1")
			n, err := c.notifyEvents(t.Context(), prefix, evs)
			if err != nil || n != len(evs) {
				t.Fatalf("notifyEvents: %d queued, %v", n, err)
			}
			close(c.stopWriting)
			<-c.writerDone

			if len(bs.frames) != len(evs) {
				t.Fatalf("%d frames written, want %d", len(bs.frames), len(evs))
			}
			for i, e := range evs {
				want, err := eventFrame(prefix, event.Encoded{Event: e.Event})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(bs.frames[i], want) {
					t.Errorf("frame %d:\n got %s\nwant %s", i, bs.frames[i], want)
				}
				var msg struct {
					Method string                `json:"method"`
					Params api.EventNotification `json:"params"`
				}
				if err := json.Unmarshal(bs.frames[i], &msg); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				got := msg.Params.Event
				if msg.Method != api.NotifyEvent || msg.Params.SubscriptionID != "sub_1" || got.Seq != e.Event.Seq ||
					!got.Time.Equal(e.Event.Time) || !bytes.Equal(got.Data, e.Event.Data) {
					t.Errorf("frame %d parses as %s %+v, want event %+v", i, msg.Method, msg.Params, e.Event)
				}
			}
			if frames, bytes := c.queue.queued(); frames != 0 || bytes != 0 {
				t.Errorf("%d frames, %d bytes still counted as queued", frames, bytes)
			}
			c.acct.b.mu.Lock()
			held := c.acct.held
			c.acct.b.mu.Unlock()
			if held != 0 {
				t.Errorf("%d bytes still held in the stream budget", held)
			}
		})
	}
}
