package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// withRewindModels adds scripted:rec (see withRecorder), the tool
// models (see withTools) and checkpoints in dir.
func withRewindModels(rec *recorder, dir string) func(*host.Config) {
	return func(c *host.Config) {
		withRecorder(rec)(c)
		withTools(c)
		c.CheckpointDir = dir
	}
}

// withTools adds the models "scripted:sh", which runs the last user
// message as a shell command, and "scripted:write", which writes the
// file it names; once the tool answered, each says so.
func withTools(c *host.Config) {
	resolve := c.ResolveModel
	c.ResolveModel = func(name string) (*host.Model, error) {
		switch name {
		case "scripted:sh":
			return &host.Model{Name: name, Provider: toolModel{name: "shell", arg: "command"}, Model: "sh"}, nil
		case "scripted:write":
			return &host.Model{Name: name, Provider: toolModel{name: "write_file", arg: "path", extra: `,"content":"written"`}, Model: "write"}, nil
		}
		return resolve(name)
	}
}

// toolModel calls tool name with the last user message as argument arg,
// then answers "done".
type toolModel struct{ name, arg, extra string }

func (m toolModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role != llm.RoleUser {
			if yield(llm.StreamEvent{Text: "done"}, nil) {
				yield(llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishStop}}, nil)
			}
			return
		}
		b, _ := json.Marshal(last.Content)
		args := `{"` + m.arg + `":` + string(b) + m.extra + `}`
		if yield(llm.StreamEvent{ToolCall: &llm.ToolCallDelta{ID: fmt.Sprintf("call_%d", len(req.Messages)), Name: m.name, Arguments: args}}, nil) {
			yield(llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishToolCalls}}, nil)
		}
	}
}

// files returns the mount's tree: path -> content (dirs "dir", links
// "->target") and mode.
func files(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "->" + target
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().Perm().String()
		default:
			b, _ := os.ReadFile(p)
			out[rel] = string(b) + " " + fi.Mode().Perm().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeTree(t *testing.T, root string) {
	t.Helper()
	for name, content := range map[string]string{"keep.txt": "keep", "mod.txt": "old", "del.txt": "bye", "sub/x.txt": "x"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// shellChanges creates, changes and deletes files and modes.
const shellChanges = "echo new > mod.txt; rm del.txt; rm -r sub; mkdir -p made/deep; echo hi > made/deep/n.txt; chmod 600 keep.txt; ln -s keep.txt link"

func runTo(t *testing.T, h *host.Host, sid, model, text string) {
	t.Helper()
	r := start(t, h, api.StartRunParams{SessionID: sid, Model: model, Input: input(text)})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run %q: %s %+v", text, got.Status, got.Error)
	}
}

// TestRewindRestoresConversationAndFiles: a rewind with files takes the
// conversation back (the next run sees none of what came after) and
// undoes what a shell command did to the mount (created, changed and
// deleted files and directories, modes, links), also across a restart
// of the host.
func TestRewindRestoresConversationAndFiles(t *testing.T) {
	rec := &recorder{}
	ck := t.TempDir()
	mod := withRewindModels(rec, ck)
	h, st := newHostWith(t, mod)
	ctx := context.Background()
	work := t.TempDir()
	writeTree(t, work)
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:rec", Mounts: []event.Mount{{ID: "work", Path: work}}})
	if err != nil {
		t.Fatal(err)
	}
	sid := s.ID
	runTo(t, h, sid, "scripted:rec", "one")
	at := lastSeq(t, h, sid)
	before := files(t, work)

	runTo(t, h, sid, "scripted:sh", shellChanges)
	if got := files(t, work); got["mod.txt"] != "new\n -rw-r--r--" || got["link"] != "->keep.txt" {
		for _, e := range allEvents(t, h, sid) {
			t.Logf("%d %s %s", e.Seq, e.Type, e.Data)
		}
		t.Fatalf("the shell did not run: %v", got)
	}
	if cps := sessionEvents(t, h, sid, event.CheckpointRecorded); len(cps) != 1 {
		t.Fatalf("%d checkpoint.recorded; want 1", len(cps))
	}

	res, err := h.RewindSession(ctx, api.RewindParams{SessionID: sid, ToSeq: at, Files: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.ToSeq != at || !res.Files || res.RestoredCount == 0 {
		t.Fatalf("rewind = %+v", res)
	}
	if got := files(t, work); !equalMaps(got, before) {
		t.Fatalf("files after the rewind:\n got %v\nwant %v", got, before)
	}
	rw := sessionEvents(t, h, sid, event.SessionRewound)
	var d event.SessionRewoundData
	if len(rw) != 1 || rw[0].Decode(&d) != nil || d.ToSeq != at || !d.Files {
		t.Fatalf("session.rewound = %+v", rw)
	}
	runTo(t, h, sid, "scripted:rec", "three")
	if got := users(rec.last()); got != "one|three" {
		t.Fatalf("after the rewind the model was sent the user messages %q; want one|three", got)
	}

	// Across a restart: the shell changes the files again, the host
	// restarts, and the rewind still puts them back.
	at = lastSeq(t, h, sid)
	runTo(t, h, sid, "scripted:sh", shellChanges)
	h.Close()
	h2, err := host.New(ctx, hostConfig(t, st, mod))
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if _, err := h2.RewindSession(ctx, api.RewindParams{SessionID: sid, ToSeq: at, Files: true}); err != nil {
		t.Fatal(err)
	}
	if got := files(t, work); !equalMaps(got, before) {
		t.Fatalf("files after the rewind on a new host:\n got %v\nwant %v", got, before)
	}
	runTo(t, h2, sid, "scripted:rec", "four")
	if got := users(rec.last()); got != "one|three|four" {
		t.Fatalf("after the second rewind the model was sent %q; want one|three|four", got)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestRewindFileTools: the checkpoint of a step of file tools looks only
// at their paths, and a rewind removes the file and directories they made.
func TestRewindFileTools(t *testing.T) {
	h, _ := newHostWith(t, func(c *host.Config) { withTools(c); c.CheckpointDir = t.TempDir() })
	ctx := context.Background()
	work := t.TempDir()
	writeTree(t, work)
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: work}}})
	if err != nil {
		t.Fatal(err)
	}
	before := files(t, work)
	at := lastSeq(t, h, s.ID)
	runTo(t, h, s.ID, "scripted:write", "mod.txt")
	runTo(t, h, s.ID, "scripted:write", "new/dir/f.txt")
	if got := files(t, work)["new/dir/f.txt"]; !strings.HasPrefix(got, "written") {
		t.Fatalf("the write did not happen: %v", files(t, work))
	}
	if _, err := h.RewindSession(ctx, api.RewindParams{SessionID: s.ID, ToSeq: at, Files: true}); err != nil {
		t.Fatal(err)
	}
	if got := files(t, work); !equalMaps(got, before) {
		t.Fatalf("files after the rewind:\n got %v\nwant %v", got, before)
	}
}

// TestRewindRefused: what a rewind cannot do whole it refuses with a
// typed error, changing nothing: a seq beyond the log, a seq an earlier
// rewind undid, a rewind while a run goes, one past a compaction, the
// files of a fork before its fork point (another session's), and for
// files a file changed since its checkpoint, a mount unmounted, and an
// incomplete checkpoint.
func TestRewindRefused(t *testing.T) {
	ctx := context.Background()
	h, st := newHostWith(t, func(c *host.Config) {
		withTools(c)
		c.CheckpointDir = t.TempDir()
		c.CheckpointMaxFileBytes = 64
	})
	work, data := t.TempDir(), t.TempDir()
	writeTree(t, work)
	if err := os.WriteFile(filepath.Join(data, "big.bin"), []byte(strings.Repeat("b", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: work, Default: true}, {ID: "data", Path: data}}})
	if err != nil {
		t.Fatal(err)
	}
	sid := s.ID
	start0 := lastSeq(t, h, sid)
	runTo(t, h, sid, "scripted:sh", "echo new > mod.txt")
	mid := lastSeq(t, h, sid)

	wantKind := func(name string, err error, kind api.Kind, reason string) {
		t.Helper()
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Kind != kind || reason != "" && ae.Data["reason"] != reason {
			t.Fatalf("%s: %v; want %s %s", name, err, kind, reason)
		}
	}
	rewound := func() int { return len(sessionEvents(t, h, sid, event.SessionRewound)) }

	_, err = h.RewindSession(ctx, api.RewindParams{SessionID: sid, ToSeq: mid + 5})
	wantKind("beyond the log", err, api.KindCursorInvalid, "")

	// A file changed since its checkpoint: nothing is restored.
	if err := os.WriteFile(filepath.Join(work, "mod.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = h.RewindSession(ctx, api.RewindParams{SessionID: sid, ToSeq: start0, Files: true})
	wantKind("a changed file", err, api.KindEnvironmentUnavailable, "changed")
	if b, _ := os.ReadFile(filepath.Join(work, "mod.txt")); string(b) != "mine" || rewound() != 0 {
		t.Fatalf("a refused rewind changed mod.txt to %q or wrote session.rewound", b)
	}
	if err := os.WriteFile(filepath.Join(work, "mod.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// An incomplete checkpoint: a file over the cap changed.
	runTo(t, h, sid, "scripted:sh", "echo small > "+filepath.Join(data, "big.bin"))
	_, err = h.RewindSession(ctx, api.RewindParams{SessionID: sid, ToSeq: mid, Files: true})
	wantKind("an incomplete checkpoint", err, api.KindEnvironmentUnavailable, "incomplete")

	// An unmounted mount.
	last := lastSeq(t, h, sid)
	runTo(t, h, sid, "scripted:sh", "echo x > "+filepath.Join(data, "other.txt"))
	if _, err := h.Unmount(ctx, api.UnmountParams{SessionID: sid, MountID: "data"}); err != nil {
		t.Fatal(err)
	}
	_, err = h.RewindSession(ctx, api.RewindParams{SessionID: sid, ToSeq: last, Files: true})
	wantKind("an unmounted mount", err, api.KindEnvironmentUnavailable, "unmounted")

	// A conversation-only rewind goes through; a seq it undid is refused.
	if _, err := h.RewindSession(ctx, api.RewindParams{SessionID: sid, ToSeq: mid}); err != nil {
		t.Fatal(err)
	}
	_, err = h.RewindSession(ctx, api.RewindParams{SessionID: sid, ToSeq: last})
	wantKind("a seq undone by a rewind", err, api.KindCursorInvalid, "")

	// The files of a fork before its fork point are its source's.
	f, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: sid, AtSeq: mid})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.RewindSession(ctx, api.RewindParams{SessionID: f.Session.ID, ToSeq: start0, Files: true})
	wantKind("a fork's files before its fork point", err, api.KindCursorInvalid, "")
	if _, err := h.RewindSession(ctx, api.RewindParams{SessionID: f.Session.ID, ToSeq: start0}); err != nil {
		t.Fatalf("a fork's conversation before its fork point: %v", err)
	}

	// While a run goes.
	r := start(t, h, api.StartRunParams{SessionID: sid, Model: "scripted:slow", Input: input("long")})
	waitFor(t, h, sid, r.ID, ofType(event.MessageDelta))
	_, err = h.RewindSession(ctx, api.RewindParams{SessionID: sid, ToSeq: mid})
	wantKind("a rewind while a run goes", err, api.KindRunConflict, "")
	if _, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID}); err != nil {
		t.Fatal(err)
	}
	wait(t, h, r.ID)

	// Past a compaction (written by another engineer's code: here, to the
	// store directly while no host holds the session).
	h.Close()
	seq, err := st.LastSeq(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	c, err := event.New("", "context.compacted", map[string]any{"summary": "s", "upToSeq": seq})
	if err != nil {
		t.Fatal(err)
	}
	c.SessionID, c.Seq, c.Time = sid, seq+1, time.Now()
	if err := st.Append(ctx, store.Batch{SessionID: sid, Events: []event.Event{c}}); err != nil {
		t.Fatal(err)
	}
	h2, err := host.New(ctx, hostConfig(t, st, func(c *host.Config) { c.CheckpointDir = t.TempDir() }))
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	_, err = h2.RewindSession(ctx, api.RewindParams{SessionID: sid, ToSeq: seq})
	wantKind("past a compaction", err, api.KindCursorInvalid, "")
}
