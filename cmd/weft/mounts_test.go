package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
)

// TestMountCommands drives weft mount, mounts and unmount against a
// running `weft serve`.
func TestMountCommands(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{Token: e.token()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: e.work}}})
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(e.dir, "My Data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	weft := func(args ...string) (string, string, int) {
		t.Helper()
		return e.weft("", append([]string{"--host", addr}, args...)...)
	}

	out, stderr, code := weft("mount", s.ID, data+":ro")
	if code != 0 || out != "mounted my-data at /environment/my-data (ro), binding version 2\n" {
		t.Fatalf("mount: %d %q %q", code, out, stderr)
	}
	out, stderr, code = weft("mount", s.ID, "--scratch", "--shell-default", "--inject", "--json")
	var r api.MountResult
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Mount == nil || r.Mount.Kind != event.KindScratch ||
		r.BindingVersion != 3 || r.CurrentDefaultShellMountID != "scratch" || len(r.Warnings) != 1 {
		t.Fatalf("mount --scratch: %d %q %q", code, out, stderr)
	}
	if _, stderr, code = weft("mount", s.ID, data, "--id", "my-data"); code == 0 || !strings.Contains(stderr, "already has mount my-data") {
		t.Fatalf("mount over an existing id: %d %q", code, stderr)
	}
	out, stderr, code = weft("mounts", s.ID)
	if code != 0 || !strings.HasPrefix(out, "binding version 3 ") || !strings.Contains(out, "my-data") || !strings.Contains(out, "default") {
		t.Fatalf("mounts: %d %q %q", code, out, stderr)
	}
	if _, stderr, code = weft("unmount", s.ID, "work"); code == 0 || !strings.Contains(stderr, "--new-default") || strings.Contains(stderr, "newDefaultMountId") {
		t.Fatalf("unmount the default: %d %q", code, stderr)
	}
	out, stderr, code = weft("unmount", s.ID, "work", "--new-default", "my-data")
	if code != 0 || out != "unmounted work, binding version 4, default my-data\n" {
		t.Fatalf("unmount: %d %q %q", code, out, stderr)
	}
	if _, _, code = weft("mount", s.ID); code != exitUsage {
		t.Fatalf("mount without a path: exit %d", code)
	}
	// A client may not mount the host's own process or state: /proc, a
	// link to it, the directory holding the state directory and the
	// store (HOME here), the state directory through a link.
	link := filepath.Join(e.work, "state")
	if err := os.Symlink(filepath.Join(e.dir, ".local", "state", "weft"), link); err != nil {
		t.Fatal(err)
	}
	procLink := filepath.Join(e.work, "p")
	if err := os.Symlink("/proc", procLink); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/proc", procLink, e.dir, link} {
		if _, stderr, code = weft("mount", s.ID, path+":ro", "--id", "x"); code == 0 || !strings.Contains(stderr, "protected path") {
			t.Errorf("mount %s: %d %q", path, code, stderr)
		}
	}
}
