package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/store/memory"
)

// remote is ctx as a client over a transport sends it: what it supplies
// is checked, unlike what the operator's own program passes in-process.
func remote(ctx context.Context) context.Context {
	return api.WithClient(ctx, api.Client{Name: "test", Transport: "websocket"})
}

// A session's mounts and MCP servers may not reach the host's own
// process: a mount of /proc (or /sys, /dev, /), of a link to /proc, a
// server whose readOnly is /proc or leads there, or whose command lies
// in /proc, is refused with Denied naming the field, at session/create and
// at env/mount, and nothing is created.
func TestClientPathsMayNotReachTheHost(t *testing.T) {
	h := mcpHost(t, memory.New())
	ctx := remote(context.Background())
	dir := t.TempDir()
	link := filepath.Join(dir, "p")
	if err := os.Symlink("/proc", link); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	denied := func(t *testing.T, err error, field string) {
		t.Helper()
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Kind != api.KindDenied || ae.Data["field"] != field || !strings.Contains(ae.Message, "host keeps from sessions") {
			t.Fatalf("error %v (%+v), want denied on %s", err, ae, field)
		}
	}
	for name, path := range map[string]string{"proc": "/proc", "environ": "/proc/self", "sys": "/sys", "dev": "/dev", "root": "/", "link": link} {
		t.Run("mount "+name, func(t *testing.T) {
			_, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{
				{ID: "work", Path: work, Default: true}, {ID: "x", Path: path, Mode: event.ModeReadOnly}}})
			denied(t, err, "mounts[1].path")
		})
	}
	for name, srv := range map[string]event.MCPServer{
		"readOnly":      {Command: "/bin/cat", ReadOnly: []string{"/usr", "/proc"}},
		"readOnly link": {Command: "/bin/cat", ReadOnly: []string{"/usr", link + "/self"}},
		"command":       {Command: "/proc/self/exe"},
	} {
		t.Run("mcp "+name, func(t *testing.T) {
			_, err := h.CreateSession(ctx, api.CreateSessionParams{MCPServers: map[string]event.MCPServer{"x": srv},
				Mounts: []event.Mount{{ID: "work", Path: work}}})
			field := "mcpServers.x.command"
			if name != "command" {
				field = "mcpServers.x.readOnly[1]"
			}
			denied(t, err, field)
		})
	}
	if res, err := h.ListSessions(context.Background(), api.ListSessionsParams{}); err != nil || len(res.Sessions) != 0 {
		t.Fatalf("refused creates left sessions: %+v, %v", res, err)
	}
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: work}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Mount(ctx, api.MountParams{SessionID: s.ID, Mount: event.Mount{ID: "proc", Path: link, Mode: event.ModeReadOnly}})
	denied(t, err, "mount.path")
	env, err := h.ListEnv(ctx, api.ListEnvParams{SessionID: s.ID})
	if err != nil || len(env.Environment.Mounts) != 1 {
		t.Fatalf("env/list after a refused mount: %+v, %v", env, err)
	}
}

// A client's mount is stored with its links resolved; if its directory is
// later replaced by a link to /proc (by a shell of the session that can
// write its parent), the binding is not opened again over it: the
// session's next run cannot read the host's environment through it.
func TestClientMountSwappedForALink(t *testing.T) {
	dir := t.TempDir()
	inner := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	// grep, since read_file takes a /proc file for empty (its size is 0);
	// environ is binary, which the file tools refuse, but a shell of the
	// session is confined to its mounts and would read it.
	read := toolCall("grep", map[string]any{"pattern": "^(Name|PPid):", "path": "/environment/inner/self/status"})
	h := pathHostOn(t, st, api.Policy{}, read)
	s, err := h.CreateSession(remote(context.Background()), api.CreateSessionParams{Mounts: []event.Mount{
		{ID: "work", Path: filepath.Join(dir, "a"), Default: true}, {ID: "inner", Path: inner, Mode: event.ModeReadOnly}}})
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	if err := os.Remove(inner); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc", inner); err != nil {
		t.Fatal(err)
	}
	h = pathHostOn(t, st, api.Policy{}, read)
	r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("go")})
	wait(t, h, r.ID)
	evs, err := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: s.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Events {
		if strings.Contains(string(e.Data), "status:1:Name:") {
			t.Fatalf("event %d (%s) shows the host's process: %.300s", e.Seq, e.Type, e.Data)
		}
	}
}
