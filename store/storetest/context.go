package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// testDoneContext checks that a write whose context is done before it
// starts is refused with the context's error and writes nothing, and that
// the refusal leaves the log appendable at the same seq. (Once a write has
// started, an implementation may finish it regardless of its context;
// the suite does not test that race.)
func testDoneContext(t *testing.T, s store.Store) {
	o := newOwner("s1", t0)
	mustAppend(t, s, o.create(t))
	done, cancel := context.WithCancel(context.Background())
	cancel()

	b := o.batch(t, ev(t, "r1", event.RunQueued, event.RunQueuedData{Model: "m"}))
	b.Receipts = []record.Receipt{{Key: "k", Method: "run/start", Fingerprint: "f", SessionID: "s1", CreatedAt: t0}}
	before := observe(t, s, "s1", []string{"r1"}, [][2]string{{"k", "run/start"}})
	if err := s.Append(done, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a done context = %v; want context.Canceled", err)
	}
	if _, err := s.PutReceipt(done, record.Receipt{Key: "k", Method: "run/start", Fingerprint: "f", CreatedAt: t0}); !errors.Is(err, context.Canceled) {
		t.Fatalf("PutReceipt with a done context = %v; want context.Canceled", err)
	}
	p := newProc("p1", "s1", "work", t0)
	if err := s.AppendProcess(done, p.batch(p.ev(t, "process.started", map[string]int{"pid": 1}))); !errors.Is(err, context.Canceled) {
		t.Fatalf("AppendProcess with a done context = %v; want context.Canceled", err)
	}
	after := observe(t, s, "s1", []string{"r1"}, [][2]string{{"k", "run/start"}})
	if diff := cmp.Diff(before, after, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("a write with a done context changed the store (-before +after):\n%s", diff)
	}
	if _, err := s.Process(context.Background(), "p1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Process after a refused first batch = %v; want ErrNotFound", err)
	}
	// The same batch goes through with a live context.
	mustAppend(t, s, b)
	if last, err := s.LastSeq(context.Background(), "s1"); err != nil || last != 2 {
		t.Fatalf("LastSeq = %d, %v; want 2", last, err)
	}
}
