package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChatModelAtStart: with no model configured, the check `weft chat`
// makes when it starts (checkModel, before the terminal UI opens) fails,
// naming -m, WEFT_MODEL and defaultModel; a model it can use passes.
func TestChatModelAtStart(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "config")}
	a := &app{stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string { return env[k] }}
	err := a.checkModel(context.Background(), nil, "", "")
	if err == nil || !strings.Contains(err.Error(), "no model configured") || !strings.Contains(err.Error(), "WEFT_MODEL") || !strings.Contains(err.Error(), "defaultModel") {
		t.Fatalf("no model: %v", err)
	}
	if err := a.checkModel(context.Background(), nil, "anthropic:claude-x", ""); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Fatalf("no key: %v", err)
	}
	script := filepath.Join(dir, "s.json")
	if err := os.WriteFile(script, []byte(`{"steps":[{"text":"hi"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env["WEFT_MODEL"] = "scripted:" + script
	if err := a.checkModel(context.Background(), nil, "", ""); err != nil {
		t.Fatalf("WEFT_MODEL: %v", err)
	}
}
