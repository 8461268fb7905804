package transcript

import (
	"context"
	"errors"
	"strings"
	"testing"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
)

// emptyLog is a Log of a session with no snapshot and no
// transcript event yet.
type emptyLog struct{}

func (emptyLog) Snapshot(context.Context) (*agent.TranscriptBuilder, int64, bool) {
	return nil, 0, false
}
func (emptyLog) Events(context.Context, int64) ([]event.Event, error) { return nil, nil }

// commit folds n user messages of text into tr, as commits would, after
// seq; it returns the last seq.
func commit(t *testing.T, tr *Cache, seq int64, n int, text string) int64 {
	t.Helper()
	for range n {
		e, err := event.New("run", event.MessageUser, event.MessageUserData{Content: event.TextParts(text)})
		if err != nil {
			t.Fatal(err)
		}
		seq++
		e.Seq = seq
		tr.Observe([]event.Event{e})
	}
	return seq
}

// A snapshot that could not be stored is tried again only after as many
// more events as make one due, not at the next run's end.
func TestTranscriptSnapshotRetryWaits(t *testing.T) {
	tr := NewCache(NewBudget(1 << 30))
	if _, _, err := tr.Messages(context.Background(), emptyLog{}); err != nil {
		t.Fatal(err)
	}
	seq := commit(t, tr, 0, snapshotEvery, "hi")
	j, ok := tr.Due()
	if !ok || j.seq != seq {
		t.Fatalf("due after %d events: %v, seq %d", snapshotEvery, ok, j.seq)
	}
	tr.Saved(j, errors.New("disk full"))
	seq = commit(t, tr, seq, snapshotEvery-1, "hi")
	if _, ok := tr.Due(); ok {
		t.Fatal("due again right after a failure")
	}
	seq = commit(t, tr, seq, 1, "hi")
	if j, ok = tr.Due(); !ok || j.seq != seq {
		t.Fatalf("not due %d events after a failure", snapshotEvery)
	}
	tr.Saved(j, nil)
	if _, ok := tr.Due(); ok {
		t.Fatal("due right after a snapshot was stored")
	}
}

// A transcript beyond maxSnapshotBytes is never stored as a snapshot.
func TestTranscriptSnapshotBounded(t *testing.T) {
	tr := NewCache(NewBudget(1 << 30))
	if _, _, err := tr.Messages(context.Background(), emptyLog{}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", maxSnapshotBytes/snapshotEvery+1)
	commit(t, tr, 0, snapshotEvery, big)
	if _, ok := tr.Due(); ok {
		t.Fatalf("a snapshot of a %d-byte transcript is due", tr.kept.b.Size())
	}
}
