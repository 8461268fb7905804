package journal_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/redact"
)

const secretValue = "sk-live-5f0d8c2b9e7a4413"

// Every event is masked before it is stored, published or returned,
// whatever its type, and in its JSON form: a tool result holding a
// secret in a stderr tail, escaped as JSON inside the output.
func TestJournalRedactsEvents(t *testing.T) {
	j, cs := newJournal(t, journal.Config{Redactor: redact.New(secretValue)})
	ctx := context.Background()
	e, err := event.New("run_1", event.ToolCallCompleted, event.ToolCallCompletedData{ID: "c1", Name: "mcp__x__y",
		Output: `server exited with status 3; stderr: {"token":"` + secretValue + `"}`, IsError: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Append(ctx, runQueued(t, "run_1"), e)
	if err != nil {
		t.Fatal(err)
	}
	var d event.ToolCallCompletedData
	if err := got[1].Decode(&d); err != nil || strings.Contains(d.Output, secretValue) || !strings.Contains(d.Output, redact.Mask) {
		t.Fatalf("returned: %+v, %v", d, err)
	}
	for _, e := range readAll(t, cs, "ses_1") {
		if strings.Contains(string(e.Data), secretValue) {
			t.Fatalf("stored event %d holds the secret: %s", e.Seq, e.Data)
		}
	}
}

// A secret streamed in pieces, across what would be two delta events
// (by size and by time), is masked whole; text held back a second with
// nothing after it is committed as it is.
func TestJournalRedactsSplitDeltas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 5 * time.Millisecond
		j, cs := newJournal(t, journal.Config{Redactor: redact.New(secretValue), CoalesceWindow: window, CoalesceBytes: 64})
		ctx := context.Background()
		if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
			t.Fatal(err)
		}
		delta := func(s string) {
			if err := j.Delta(ctx, "run_1", event.MessageDelta, 1, s); err != nil {
				t.Fatal(err)
			}
		}
		// Cut by time: the first half waits past its window.
		delta("the key is " + secretValue[:9])
		time.Sleep(window + time.Millisecond)
		synctest.Wait()
		delta(secretValue[9:] + " ok")
		// Cut by size: the cap falls inside the value.
		delta(strings.Repeat("x", 60) + secretValue[:6])
		delta(secretValue[6:] + " end ")
		// A prefix that never completes goes out after a second.
		delta("sk-l")
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if n, _ := cs.LastSeq(ctx, "ses_1"); n != 6 {
			t.Fatalf("half a second later: last seq %d, want 6 (sk-l held back)", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		var text strings.Builder
		for _, e := range readAll(t, cs, "ses_1") {
			var d event.DeltaData
			if e.Type != event.MessageDelta || e.Decode(&d) != nil {
				continue
			}
			text.WriteString(d.Text)
		}
		want := "the key is " + redact.Mask + " ok" + strings.Repeat("x", 60) + redact.Mask + " end sk-l"
		if text.String() != want {
			t.Fatalf("stored text %q, want %q", text.String(), want)
		}
	})
}
