package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"weft.dev/weft/internal/testenv"
)

// acpScript is the scripted model of the ACP end-to-end tests: a gated
// write, its answer, then a slow answer to cancel or to follow.
const acpScript = `{"steps": [
	{"text": "I'll write the file.", "toolCalls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi"}}]},
	{"text": "Done."},
	{"text": "one two three four five six seven eight nine ten eleven twelve", "delayMs": 120}
]}`

// slowScript answers every prompt slowly, for following a run across
// ACP processes.
const slowScript = `{"steps": [{"text": "one two three four five six seven eight nine ten eleven twelve", "delayMs": 150}], "loop": true}`

// editor runs testdata/acp-editor.mjs (the official ACP TypeScript
// client) for scenario against the weft binary with args, and returns
// the figures it printed.
func (e *testEnv) editor(t *testing.T, scenario string, args ...string) map[string]float64 {
	t.Helper()
	sdk, node := testenv.NPMPackage(t, "@agentclientprotocol/sdk")
	script, err := filepath.Abs("testdata/acp-editor.mjs")
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(node, append([]string{script, sdk, scenario, weftBin, e.work}, args...)...)
	c.Dir = e.work
	c.Env = e.cmd().Env
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, os.Stderr
	if err := c.Run(); err != nil {
		t.Fatalf("acp-editor %s: %v\n%s", scenario, err, out.String())
	}
	var figures map[string]float64
	if err := json.Unmarshal(out.Bytes(), &figures); err != nil {
		t.Fatalf("acp-editor printed %q: %v", out.String(), err)
	}
	return figures
}

// TestACPEditor drives `weft acp` (a host in its own process) with the
// official ACP TypeScript client as an editor spawns it: initialize, a
// new session, a prompt whose tool call asks for permission (allowed),
// a prompt cancelled mid-stream, then the process killed, a new one
// started, and session/load with the whole history back.
func TestACPEditor(t *testing.T) {
	e := newEnv(t)
	model := "scripted:" + e.script("acp.json", acpScript)
	figures := e.editor(t, "local", "-m", model)
	if b, err := os.ReadFile(filepath.Join(e.work, "hello.txt")); err != nil || string(b) != "hi" {
		t.Errorf("the allowed write did not happen: %q %v", b, err)
	}
	t.Logf("spawn → initialize %.1f ms (again: %.1f ms); load → first update %.1f ms; %v updates replayed",
		figures["initializeMs"], figures["reinitializeMs"], figures["loadFirstUpdateMs"], figures["replayed"])
}

// TestACPThroughServe: with `weft serve` running, `weft acp --host` is a
// thin client: killed mid-run, the run goes on in the host, and a new
// `weft acp` loads the session with the run still streaming.
func TestACPThroughServe(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	model := "scripted:" + e.script("slow.json", slowScript)
	figures := e.editor(t, "serve", "--host", addr, "-m", model)
	if figures["streamedAfterLoad"] <= 0 {
		t.Errorf("nothing streamed after the load: %v", figures)
	}
}
