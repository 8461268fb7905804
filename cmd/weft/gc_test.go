package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGC: `weft gc --dry-run` lists the sessions the config file's
// retention would purge and removes nothing; `weft gc` purges them, and
// the purged session is gone from every command.
func TestGC(t *testing.T) {
	e := newEnv(t)
	if out, _, code := e.weft("", "gc"); code != 0 || !strings.Contains(out, "no retention policy") {
		t.Fatalf("gc without a policy: %d %q", code, out)
	}
	cfg := filepath.Join(e.dir, "config", "weft")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"retention": {"deletedAfter": "1ns", "maxSessions": 1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := e.script("s.json", `{"steps":[{"text":"hi"}]}`)
	for range 2 {
		if _, stderr, code := e.weft("", "run", "-m", "scripted:"+s, "-p", "x"); code != 0 {
			t.Fatal(stderr)
		}
	}
	out, _, _ := e.weft("", "sessions", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("sessions: %q", out)
	}
	out, stderr, code := e.weft("", "gc", "--dry-run")
	if code != 0 || !strings.Contains(out, "would purge 1 session") || strings.Count(out, "would purge ses_") != 1 {
		t.Fatalf("gc --dry-run: %d %q %s", code, out, stderr)
	}
	if out, _, _ := e.weft("", "sessions", "--json"); len(strings.Split(strings.TrimSpace(out), "\n")) != 2 {
		t.Fatalf("a dry run purged: %q", out)
	}
	out, stderr, code = e.weft("", "gc")
	if code != 0 || !strings.Contains(out, "purged 1 session") || !strings.Contains(out, " count ") {
		t.Fatalf("gc: %d %q %s", code, out, stderr)
	}
	old := strings.Fields(out[strings.Index(out, "ses_"):])[0]
	sid := e.onlySession()
	if sid == old {
		t.Fatalf("gc purged the newest session %s", sid)
	}
	if _, stderr, code := e.weft("", "events", old); code == 0 || !strings.Contains(stderr, "not found") {
		t.Fatalf("events of the purged session: %d %s", code, stderr)
	}
}
