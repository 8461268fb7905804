package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
)

func TestLoadErrorsSayWhere(t *testing.T) {
	cases := []struct {
		name, body string
		wants      []string
	}{
		{"truncated", "{\n  \"defaultModel\": \"x\",\n  \"models\": {\n", []string{":4:1:", "ends in the middle"}},
		{"syntax", "{\n  \"maxSteps\": 5,,\n}", []string{":2:18:", "invalid JSON"}},
		{"unknown key", "{\n  \"defaultModel\": \"x\",\n  \"polcy\": {}\n}", []string{":3:3:", `unknown key "polcy"`, "defaultModel, store"}},
		{"unknown model key", "{\"models\": {\"m\": {\"provider\": \"openai\", \"model\": \"x\",\n \"apikey\": \"K\"}}}", []string{":2:2:", `unknown key "apikey"`, "apiKeyEnv"}},
		{"wrong type", "{\"maxSteps\": \"many\"}", []string{":1:", "maxSteps", "int"}},
		{"empty", "", []string{"empty"}},
		{"two values", "{} {}", []string{"one object"}},
		{"network", "{\"network\": \"open\"}", []string{":1:2:", `network "open"`}},
		{"negative steps", "{\"maxSteps\": -1}", []string{"maxSteps -1"}},
		{"negative checkpoint cap", "{\"checkpoints\": {\"maxBytes\": -5}}", []string{":1:2:", "checkpoints", "maxBytes"}},
		{"unknown checkpoint key", "{\"checkpoints\": {\"of\": true}}", []string{`unknown key "of"`}},
		{"bad policy", "{\n\"policy\": {\"rules\": [{\"tool\": \"shell\", \"action\": \"prompt\"}]}}", []string{":2:1:", "policy.rules[0].action", "unknown action"}},
		{"bad preset", "{\"policy\": {\"preset\": \"ask-sometimes\"}}", []string{"policy.preset", "ask-writes"}},
		{"model fields", "{\"models\": {\"m\": {\"provider\": \"openai\"}}}", []string{"models.m", "required"}},
		{"model timeout", "{\"models\": {\"m\": {\"provider\": \"openai\", \"model\": \"x\",\n\"idleTimeoutMs\": -5}}}", []string{":2:1:", "models.m.idleTimeoutMs -5", "-1 for no limit"}},
		{"unknown mcp key", "{\"mcpServers\": {\"fs\": {\"command\": \"x\",\n \"arguments\": []}}}", []string{":2:2:", `unknown key "arguments"`, "an MCP server's keys are command, args"}},
		{"mcp server", "{\"mcpServers\": {\n\"fs\": {\"command\": \"x\", \"url\": \"http://y\"}}}", []string{":2:1:", "mcpServers.fs", "not both"}},
		{"mcp name", "{\"mcpServers\": {\"a__b\": {\"command\": \"x\"}}}", []string{"mcpServers.a__b", "separates the server from the tool"}},
		{"mcp session env", "{\"mcpSessionEnv\": [\"${X}\"]}", []string{"mcpSessionEnv", "not a variable name"}},
		{"negative limit", "{\"limits\": {\"command\": {\"processes\": -2}}}", []string{"limits.command.processes -2", "-1 for no limit"}},
		{"tiny file size", "{\"limits\": {\"command\": {\"fileSizeBytes\": 100}}}", []string{"limits.command.fileSizeBytes 100"}},
		{"session cpu", "{\"limits\": {\"session\": {\"cpuTimeMs\": 1000}}}", []string{"limits.session", "each command"}},
		{"unknown limit key", "{\"limits\": {\"command\": {\"memory\": 1}}}", []string{`unknown key "memory"`, "memoryBytes"}},
		{"unknown limits part", "{\"limits\": {\"each\": {}}}", []string{`unknown key "each"`, "maxCommand"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(p, []byte(c.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), "config "+p) {
				t.Errorf("error does not name the file: %v", err)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadPolicy(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	body := `{"policy": {"preset": "read-only", "rules": [{"tool": "shell", "match": {"command": "git"}, "action": "allow"}]},
	 "inputTimeoutMs": 60000}`
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if f.Policy.Preset != api.PresetReadOnly || len(f.Policy.Rules) != 1 || f.Policy.Rules[0].Match.Command != "git" {
		t.Fatalf("policy %+v", f.Policy)
	}
	if f.InputTimeout().Seconds() != 60 {
		t.Fatalf("input timeout %v", f.InputTimeout())
	}
	if f, err := Load(filepath.Join(t.TempDir(), "missing.json")); err != nil || f.Policy.Preset != "" {
		t.Fatalf("a missing file: %+v %v", f, err)
	}
}

// TestKeysDocumented: every key of File is listed by Keys and in
// docs/config.md.
func TestKeysDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range slices.Concat(Keys(), modelKeys, mcpKeys(), limitsKeys, limitKeys, retentionKeys) {
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/config.md does not document %q", k)
		}
	}
	// Keys and modelKeys are complete.
	for typ, keys := range map[reflect.Type][]string{reflect.TypeFor[File](): Keys(), reflect.TypeFor[Model](): modelKeys, reflect.TypeFor[event.MCPServer](): mcpKeys(),
		reflect.TypeFor[Limits](): limitsKeys, reflect.TypeFor[event.Limits](): limitKeys, reflect.TypeFor[Retention](): retentionKeys} {
		var fields []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields = append(fields, name)
		}
		slices.Sort(fields)
		keys = slices.Sorted(slices.Values(keys))
		if !slices.Equal(fields, keys) {
			t.Errorf("%s has keys %v; the list says %v", typ, fields, keys)
		}
	}
}

// TestLimits: the file's limits over the machine's defaults, -1 for
// none, and the ceiling of a session's own.
func TestLimits(t *testing.T) {
	f, err := Parse([]byte(`{"limits": {"command": {"processes": 100, "memoryBytes": -1}, "maxCommand": {"processes": 200}, "host": {"processes": 1000}}}`))
	if err != nil {
		t.Fatal(err)
	}
	cmd, ses, host := f.EffectiveLimits()
	dc, ds, dh := sandbox.DefaultLimits(sandbox.MachineMemory())
	if cmd.Processes != 100 || cmd.Memory != 0 || cmd.FileSize != dc.FileSize {
		t.Errorf("command limits %+v", cmd)
	}
	if ses != ds || host.Processes != 1000 || host.Memory != dh.Memory {
		t.Errorf("session %+v, host %+v", ses, host)
	}
	if m := f.MaxCommandLimits(); m.Processes != 200 || m.MemoryBytes != 0 || m.FileSizeBytes != dc.FileSize {
		t.Errorf("ceiling %+v", m)
	}
	if sb := f.Sandbox(); sb.Limits != cmd {
		t.Errorf("sandbox limits %+v", sb.Limits)
	}
}
