package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
)

// The crash test runs this test binary again as a child (TestCrashChild)
// that appends to a SQLite file in a loop and prints every acknowledged
// append; the parent SIGKILLs it at a random point and checks the file.
const (
	crashPathEnv = "WEFT_SQLITE_CRASH_PATH"
	crashIterEnv = "WEFT_SQLITE_CRASH_ITER"
)

var crashSessions = []string{"crash-a", "crash-b", "crash-c"}

// batchTag is added to every event's data: which batch the event belongs to
// and how many events that batch has.
type batchTag struct {
	Batch string `json:"batch"`
	Size  int    `json:"size"`
}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs child processes")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	acked := make(map[string]int64)
	const iterations = 8
	for iter := range iterations {
		for id, seq := range runCrashChild(t, path, iter) {
			acked[id] = max(acked[id], seq)
		}
		verifyCrashStore(t, path, acked)
	}
	t.Logf("after %d kills: acknowledged last seqs %v", iterations, acked)
}

// runCrashChild starts a child, kills it 5–200 ms after its first
// acknowledged append, and returns the last seq acknowledged per session.
func runCrashChild(t *testing.T, path string, iter int) map[string]int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashPathEnv+"="+path, crashIterEnv+"="+strconv.Itoa(iter))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := make(map[string]int64)
	first := make(chan struct{})
	done := make(chan error, 1)
	go func() { // owned here: ends at EOF, which the kill guarantees
		sc := bufio.NewScanner(out)
		n := 0
		var other []string
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[0] != "ack" {
				other = append(other, sc.Text())
				continue
			}
			seq, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				other = append(other, sc.Text())
				continue
			}
			acked[f[1]] = seq
			if n++; n == 1 {
				close(first)
			}
		}
		if len(other) > 0 && n == 0 {
			done <- fmt.Errorf("child printed %q", other)
			return
		}
		done <- sc.Err()
	}()
	select {
	case <-first:
	case err := <-done:
		cmd.Wait()
		t.Fatalf("child %d ended before its first append: %v\n%s", iter, err, stderr.String())
	case <-time.After(60 * time.Second):
	}
	// The kill lands at a random moment of the child's work, most often in
	// the middle of a transaction: a random time, not a count of acks,
	// which would always kill just after one. The child must not end
	// before.
	select {
	case <-time.After(time.Duration(5+rand.IntN(196)) * time.Millisecond):
	case err := <-done:
		cmd.Wait()
		t.Fatalf("child %d ended before it was killed: %v\n%s", iter, err, stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	err = <-done
	werr := cmd.Wait()
	if err != nil {
		t.Fatalf("child %d: %v\n%s", iter, err, stderr.String())
	}
	if ee := (*exec.ExitError)(nil); !errors.As(werr, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("child %d ended with %v, not by the kill\n%s", iter, werr, stderr.String())
	}
	return acked
}

// verifyCrashStore reopens the file and checks every acknowledged event is
// there, the logs are gap-free from 1, every batch is whole or absent, and
// the records equal the projection of the log.
func verifyCrashStore(t *testing.T, path string, acked map[string]int64) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	for _, id := range crashSessions {
		last, err := s.LastSeq(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			if acked[id] > 0 {
				t.Fatalf("session %s: acknowledged up to %d, now unknown", id, acked[id])
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if last < acked[id] {
			t.Fatalf("session %s: last seq %d < acknowledged %d", id, last, acked[id])
		}
		var evs []event.Event
		for after := int64(0); ; {
			page, err := s.Read(ctx, store.ReadParams{SessionID: id, After: after, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			evs = append(evs, page...)
			after = page[len(page)-1].Seq
		}
		if int64(len(evs)) != last {
			t.Fatalf("session %s: %d events, last seq %d", id, len(evs), last)
		}
		p := record.NewProjection(record.Session{}, nil)
		count := make(map[string]int)
		size := make(map[string]int)
		var prev string
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("session %s: event %d has seq %d", id, i, e.Seq)
			}
			var tag batchTag
			if err := e.Decode(&tag); err != nil || tag.Batch == "" {
				t.Fatalf("session %s seq %d: no batch tag: %v", id, e.Seq, err)
			}
			if tag.Batch != prev && count[tag.Batch] > 0 {
				t.Fatalf("session %s seq %d: batch %s is not contiguous", id, e.Seq, tag.Batch)
			}
			prev = tag.Batch
			count[tag.Batch]++
			size[tag.Batch] = tag.Size
			if err := p.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		for b, n := range count {
			if n != size[b] {
				t.Fatalf("session %s: batch %s has %d of its %d events", id, b, n, size[b])
			}
		}
		sess, err := s.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(p.Session, sess); diff != "" {
			t.Fatalf("session %s record differs from its log (-log +stored):\n%s", id, diff)
		}
		runs, err := s.Runs(ctx, store.ListRunsParams{SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		want := p.Runs()
		slices.SortFunc(want, func(a, b record.Run) int { return int(a.FirstSeq - b.FirstSeq) })
		if diff := cmp.Diff(want, runs); diff != "" {
			t.Fatalf("session %s runs differ from its log (-log +stored):\n%s", id, diff)
		}
	}
}

// TestCrashChild is the child of TestCrash; it does nothing (and passes,
// so that no skip hides a real one) unless started by it.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashPathEnv)
	if path == "" {
		return
	}
	iter := os.Getenv(crashIterEnv)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	type owner struct {
		proj   *record.Projection
		run    int
		batch  int
		runID  string
		clock  time.Time
		needed bool // the next batch creates the session
	}
	owners := make(map[string]*owner)
	for _, id := range crashSessions {
		o := &owner{clock: time.Now()}
		sess, err := s.Session(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			o.proj = record.NewProjection(record.Session{}, nil)
			o.needed = true
		case err != nil:
			t.Fatal(err)
		default:
			runs, err := s.Runs(ctx, store.ListRunsParams{SessionID: id})
			if err != nil {
				t.Fatal(err)
			}
			o.proj = record.NewProjection(sess, runs)
			o.run = len(runs)
			o.runID = sess.ActiveRunID
			o.clock = sess.UpdatedAt
		}
		owners[id] = o
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for n := 0; ; n++ {
		id := crashSessions[n%len(crashSessions)]
		o := owners[id]
		o.batch++
		var specs []struct {
			run  string
			typ  event.Type
			data any
		}
		add := func(run string, typ event.Type, data any) {
			specs = append(specs, struct {
				run  string
				typ  event.Type
				data any
			}{run, typ, data})
		}
		if o.needed {
			add("", event.SessionCreated, event.SessionCreatedData{Title: id})
			o.needed = false
		}
		if o.runID == "" || o.batch%10 == 0 {
			if o.runID != "" {
				add(o.runID, event.Usage, event.UsageData{Step: 1, Usage: event.TokenUsage{InputTokens: 10, OutputTokens: 2}})
				add(o.runID, event.RunCompleted, event.RunEndedData{Steps: 1})
			}
			o.run++
			o.runID = fmt.Sprintf("%s-run-%d", id, o.run)
			add(o.runID, event.RunQueued, event.RunQueuedData{Model: "m"})
			add(o.runID, event.RunStarted, event.RunStartedData{Model: "m"})
			add(o.runID, event.StepStarted, event.StepData{Step: 1})
		}
		for range 1 + rng.IntN(100) {
			add(o.runID, event.MessageDelta, event.DeltaData{Step: 1, Text: strings.Repeat("x", rng.IntN(300))})
		}
		tag := batchTag{Batch: fmt.Sprintf("%s.%d", iter, o.batch), Size: len(specs)}
		b := store.Batch{SessionID: id}
		for _, sp := range specs {
			data, err := tagged(sp.data, tag)
			if err != nil {
				t.Fatal(err)
			}
			o.clock = o.clock.Add(time.Microsecond)
			e := event.Event{Seq: o.proj.Session.LastSeq + 1, SessionID: id, RunID: sp.run, Type: sp.typ, Time: o.clock, Data: data}
			if err := o.proj.Apply(e); err != nil {
				t.Fatal(err)
			}
			b.Events = append(b.Events, e)
		}
		b.SetRecords(o.proj.Flush())
		if err := s.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ack %s %d\n", id, o.proj.Session.LastSeq)
	}
}

// tagged marshals v with tag's fields added.
func tagged(v any, tag batchTag) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["batch"], m["size"] = tag.Batch, tag.Size
	return json.Marshal(m)
}
