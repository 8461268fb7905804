package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/process"
	"weft.dev/weft/store/record"
)

// markedProcesses returns the pids whose environment carries the marker of
// process id: everything a background process started.
func markedProcesses(id string) []string {
	want := []byte(process.MarkerEnv + "=" + id + "\x00")
	var pids []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue // a zombie is dead
		}
		if bytes.Contains(append(b, 0), want) {
			pids = append(pids, d.Name())
		}
	}
	return pids
}

// TestServeSIGKILLLeavesNoOrphan: a background `sh -c 'sleep 300 & sleep
// 300'` under a `weft serve` that is SIGKILLed: after the restart nothing
// of it survives and its record says abandoned.
func TestServeSIGKILLLeavesNoOrphan(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	tok := e.token()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c.CreateSession(ctx, api.CreateSessionParams{Mounts: mountsFor(e)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.StartProcess(ctx, api.ProcessStartParams{SessionID: s2.ID, Command: "sh -c 'sleep 300 & sleep 300'"})
	if err != nil {
		t.Fatal(err)
	}
	poll(10*time.Second, func() bool { return len(markedProcesses(p.ID)) >= 3 })
	if n := len(markedProcesses(p.ID)); n < 3 {
		t.Fatalf("the background process has %d processes, want 3", n)
	}
	// The CLI sees it.
	out, stderr, code := e.weft("", "--host", addr, "ps", "-s", s2.ID)
	if code != 0 || !strings.Contains(out, p.ID) || !strings.Contains(out, "running") || !strings.Contains(out, s2.ID) ||
		!strings.HasPrefix(out, "ID ") || !strings.Contains(out, "SESSION") {
		t.Fatalf("weft ps: %d %q %s", code, out, stderr)
	}
	c.Close()
	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()

	srv = e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	if left := markedProcesses(p.ID); len(left) > 0 {
		t.Fatalf("processes of %s survived the host: %v", p.ID, left)
	}
	c, err = client.Dial(ctx, addr, client.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.GetProcess(ctx, api.ProcessIDParams{ID: p.ID})
	if err != nil || got.Status != record.ProcessAbandoned {
		t.Fatalf("record after restart: %+v %v", got, err)
	}
	out, _, _ = e.weft("", "--host", addr, "ps", "-s", s2.ID, "--all")
	if !strings.Contains(out, "abandoned") {
		t.Fatalf("weft ps --all: %q", out)
	}
}

func mountsFor(e *testEnv) []event.Mount {
	return []event.Mount{{ID: "work", Path: e.work, Default: true}}
}

// TestProcCommands: weft proc logs, wait, signal and kill through a host.
func TestProcCommands(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	tok := e.token()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Mounts: mountsFor(e)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID,
		Command: "trap 'echo got-int; exit 7' INT; for i in 1 2 3; do echo line$i; done; while :; do sleep 0.05; done"})
	if err != nil {
		t.Fatal(err)
	}
	follow, err := c.FollowProcess(ctx, api.ProcessFollowParams{ID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	var seen []byte
	for ch, err := range follow {
		if err != nil {
			t.Fatalf("following %s: %v after %q", p.ID, err, seen)
		}
		if seen = append(seen, ch.Data...); strings.Contains(string(seen), "line3\n") {
			break
		}
	}
	out, _, code := e.weft("", "--host", addr, "proc", "logs", p.ID)
	if code != 0 || out != "line1\nline2\nline3\n" {
		t.Fatalf("proc logs: %d %q", code, out)
	}
	out, _, code = e.weft("", "--host", addr, "proc", "logs", p.ID, "--offset", "6")
	if code != 0 || out != "line2\nline3\n" {
		t.Fatalf("proc logs --offset: %d %q", code, out)
	}
	out, stderr, code := e.weft("", "--host", addr, "proc", "signal", p.ID, "interrupt", "--payload", `{"why":"test"}`)
	if code != 0 || !strings.Contains(out, "signal.interrupt recorded") {
		t.Fatalf("proc signal: %d %q %s", code, out, stderr)
	}
	out, _, code = e.weft("", "--host", addr, "proc", "wait", p.ID)
	if code != 1 || !strings.Contains(out, p.ID+" failed (exit 7)") {
		t.Fatalf("proc wait: %d %q", code, out)
	}
	out, _, code = e.weft("", "--host", addr, "proc", "wait", p.ID, "--json")
	if code != 1 || !strings.Contains(out, `"exitCode":7`) {
		t.Fatalf("proc wait --json: %d %q", code, out)
	}
	out, _, _ = e.weft("", "--host", addr, "proc", "logs", p.ID, "--follow")
	if !strings.HasSuffix(out, "got-int\n") {
		t.Fatalf("proc logs --follow of an ended process: %q", out)
	}
	q, err := c.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Command: "sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	out, _, code = e.weft("", "--host", addr, "proc", "kill", q.ID)
	if code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("proc kill: %d %q", code, out)
	}
	_, stderr, code = e.weft("", "--host", addr, "proc", "wait", "proc_nope")
	if code != 1 || !strings.Contains(stderr, "not found") {
		t.Fatalf("proc wait of an unknown id: %d %s", code, stderr)
	}
}

// TestLogWriterMarksLostOutput: weft proc logs prints a lost range's mark
// where the output was lost, on a line of its own.
func TestLogWriterMarksLostOutput(t *testing.T) {
	var b bytes.Buffer
	w := &logWriter{w: &b}
	for _, c := range []api.Chunk{
		{Stream: "stdout", Offset: 0, Data: []byte("n1\nn2")},
		{Offset: 5, Lost: 64, Reason: api.LostStoreUnavailable},
		{Stream: "stdout", Offset: 69, Data: []byte("n9\n")},
		{Offset: 72, Lost: 3, Reason: api.LostStoreUnavailable},
		{Stream: "stderr", Offset: 75, Data: []byte("end\n")},
	} {
		w.chunk(c)
	}
	want := "n1\nn2\n[64 bytes lost at offset 5: store unavailable]\nn9\n[3 bytes lost at offset 72: store unavailable]\nend\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
}
