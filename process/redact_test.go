package process_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/process"
	"weft.dev/weft/redact"
)

// A process log stores no secret: a shell's output masks one written in
// two pieces with a pause between them (two chunks), a tool process's
// result and its end record mask one too, and offsets stay contiguous.
func TestProcessLogRedacts(t *testing.T) {
	const secret = "ghp_secretvalue0123456789"
	f := setup(t, process.Config{FlushInterval: 5 * time.Millisecond, Redactor: redact.New(secret)})
	p := f.shell(t, `printf 'token: ghp_secr'; sleep 0.1; printf 'etvalue0123456789 ok\n'; printf 'and ghp_s'`)
	res := f.await(t, p.ID)
	out, err := f.m.Output(context.Background(), p.ID, 0, 1<<20, owner)
	if err != nil {
		t.Fatal(err)
	}
	if want := "token: " + redact.Mask + " ok\nand ghp_s"; string(out.Data) != want || res.Process.OutputBytes != int64(len(want)) {
		t.Fatalf("output %q (%d bytes recorded), want %q", out.Data, res.Process.OutputBytes, want)
	}
	tp := handleOf(t, callTool(t, f, "start_tool", "c1", map[string]any{"tool": "echo", "args": map[string]any{"text": secret}}, owner))
	done := f.await(t, tp.ID)
	for _, e := range f.log(t, tp.ID) {
		if strings.Contains(string(e.Data), secret) {
			t.Errorf("tool process event %s holds the secret: %s", e.Type, e.Data)
		}
	}
	if strings.Contains(done.Tail, secret) || !strings.Contains(done.Tail, redact.Mask) {
		t.Errorf("await tail %q", done.Tail)
	}
}
