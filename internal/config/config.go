// Package config reads weft's optional configuration file and resolves
// "provider:model" names to providers. Only the CLI uses it: library
// packages read no environment or files.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/policy"
	"weft.dev/weft/tool/mcp"
)

// File is the configuration file, $XDG_CONFIG_HOME/weft/config.json.
type File struct {
	// DefaultModel is used when neither -m nor WEFT_MODEL is given.
	DefaultModel string `json:"defaultModel,omitempty"`
	// Store is the store DSN used when neither --store nor WEFT_STORE is given.
	Store string `json:"store,omitempty"`
	// MaxSteps caps the steps of a run; zero means 50.
	MaxSteps int `json:"maxSteps,omitempty"`
	// Models are named models, usable as -m NAME.
	Models map[string]Model `json:"models,omitempty"`
	// Unsandboxed runs shells without the Landlock sandbox. Only for
	// kernels without Landlock, where shells are refused otherwise.
	Unsandboxed bool `json:"unsandboxed,omitempty"`
	// Network is the shells' network policy: "deny" (default) or "allow".
	Network string `json:"network,omitempty"`
	// Limits bound what commands (shells, background processes, MCP
	// servers) may use; unset parts take [sandbox.DefaultLimits].
	Limits Limits `json:"limits,omitzero"`
	// Policy is the host's approval policy, the lowest layer under each
	// session's and each run's (docs/policy.md). Its preset, if any, is
	// the fallback of every run; without one, the CLI supplies its
	// approval mode (docs/config.md).
	Policy api.Policy `json:"policy,omitzero"`
	// InputTimeoutMs, if positive, is how long a question the model asks
	// (ask_user) waits for an answer before the call fails; zero means
	// no limit.
	InputTimeoutMs int64 `json:"inputTimeoutMs,omitempty"`
	// MCPServers are the host's MCP tool servers, by name, offered to
	// every session (docs/config.md).
	MCPServers map[string]event.MCPServer `json:"mcpServers,omitempty"`
	// MCPSessionEnv names the host environment variables a session's own
	// MCP servers may read as ${VAR} (a token for an HTTP server).
	MCPSessionEnv []string `json:"mcpSessionEnv,omitempty"`
	// Checkpoints configures the file checkpoints that session/rewind
	// with files restores from (docs/config.md); on by default.
	Checkpoints Checkpoints `json:"checkpoints,omitzero"`
	// Budgets are the default budgets of runs and sessions
	// (docs/config.md): a client's own budget is laid over them, field
	// by field.
	Budgets Budgets `json:"budgets,omitzero"`
	// Retention is the retention policy of ended sessions and the
	// checkpoint blobs (docs/config.md); none by default.
	Retention Retention `json:"retention,omitzero"`
}

// Budgets are the host's default budgets (host.Budgets).
type Budgets struct {
	// Run is every run's, under the run's own (run/start budget).
	Run event.Budget `json:"run,omitzero"`
	// Session is every new session's, under its own (session/create
	// budget).
	Session event.Budget `json:"session,omitzero"`
	// Host caps what all the host's runs spend together: tokens, cost,
	// steps; it always stops.
	Host event.Budget `json:"host,omitzero"`
}

// Checkpoints are the file checkpoints' settings. The host keeps, under
// its state directory, a copy of each read-write mount's files before
// its first writing step and what each step changed after it.
type Checkpoints struct {
	// Off keeps no checkpoints: nothing is copied, and a rewind with
	// files is refused (its conversation part still works).
	Off bool `json:"off,omitempty"`
	// MaxFileBytes and MaxBytes bound a file and a checkpoint; a
	// checkpoint past them is incomplete and no rewind with files
	// crosses it. Zero takes the defaults (64 MiB, 1 GiB).
	MaxFileBytes int64 `json:"maxFileBytes,omitempty"`
	MaxBytes     int64 `json:"maxBytes,omitempty"`
}

// InputTimeout is InputTimeoutMs as a duration.
func (f File) InputTimeout() time.Duration {
	return time.Duration(f.InputTimeoutMs) * time.Millisecond
}

// Limits are the limits of the configuration file (docs/config.md). A
// field of a zero value takes the default; -1 in one of its fields means
// no limit of that kind.
type Limits struct {
	// Command is the default of each command's tree.
	Command event.Limits `json:"command,omitzero"`
	// MaxCommand is the most a session may ask for each command of its
	// own (session/create limits); a field left out is Command's.
	MaxCommand event.Limits `json:"maxCommand,omitzero"`
	// Session bounds the running commands of one session together: its
	// processes and memory.
	Session event.Limits `json:"session,omitzero"`
	// Host bounds every running command of the host together: processes
	// and memory.
	Host event.Limits `json:"host,omitzero"`
}

// limitsKeys lists the keys of limits, and limitKeys those of each part.
var (
	limitsKeys = []string{"command", "maxCommand", "session", "host"}
	limitKeys  = []string{"processes", "memoryBytes", "cpuTimeMs", "fileSizeBytes"}
)

// Sandbox returns the shell sandbox configuration the file asks for, its
// commands' limits completed with [sandbox.DefaultLimits] for this
// machine. Its Sessions is nil: the caller that runs commands for
// sessions makes them with [File.Sessions].
func (f File) Sandbox() *sandbox.Config {
	cmd, _, _ := f.EffectiveLimits()
	return &sandbox.Config{Unsandboxed: f.Unsandboxed, Network: f.Network, Limits: cmd}
}

// Sessions makes what the commands of each session share, bounded by the
// file's session and host limits (see [sandbox.Sessions]). Close it after
// the last command has ended.
func (f File) Sessions() (*sandbox.Sessions, error) {
	_, ses, host := f.EffectiveLimits()
	return sandbox.NewSessions(sandbox.SessionsConfig{Session: ses, Host: host})
}

// EffectiveLimits returns the limits of each command, of each session's
// commands together and of the host's: the file's, with the defaults of
// this machine where it sets none.
func (f File) EffectiveLimits() (command, session, host sandbox.Limits) {
	dc, ds, dh := sandbox.DefaultLimits(sandbox.MachineMemory())
	return effective(f.Limits.Command, dc), effective(f.Limits.Session, ds), effective(f.Limits.Host, dh)
}

// MaxCommandLimits returns the most a session may ask for each command,
// as session/create takes limits: zero fields mean no ceiling.
func (f File) MaxCommandLimits() event.Limits {
	cmd, _, _ := f.EffectiveLimits()
	m := effective(f.Limits.MaxCommand, cmd)
	return event.Limits{Processes: m.Processes, MemoryBytes: m.Memory, CPUTimeMs: m.CPUTime.Milliseconds(), FileSizeBytes: m.FileSize}
}

// effective is l over the defaults d: a field left out takes d's, -1
// means none.
func effective(l event.Limits, d sandbox.Limits) sandbox.Limits {
	out := sandbox.LimitsOf(l).Or(d)
	if l.Processes < 0 {
		out.Processes = 0
	}
	if l.MemoryBytes < 0 {
		out.Memory = 0
	}
	if l.CPUTimeMs < 0 {
		out.CPUTime = 0
	}
	if l.FileSizeBytes < 0 {
		out.FileSize = 0
	}
	return out
}

// checkLimits checks the limits of the file; pos places errors.
func checkLimits(l Limits, pos func(key string) string) error {
	parts := []struct {
		name string
		l    event.Limits
	}{{"command", l.Command}, {"maxCommand", l.MaxCommand}, {"session", l.Session}, {"host", l.Host}}
	for _, p := range parts {
		for i, v := range []int64{int64(p.l.Processes), p.l.MemoryBytes, p.l.CPUTimeMs, p.l.FileSizeBytes} {
			if v < -1 {
				return fmt.Errorf("%s: limits.%s.%s %d: want a positive number, or -1 for no limit", pos(p.name), p.name, limitKeys[i], v)
			}
		}
		if p.l.FileSizeBytes > 0 && p.l.FileSizeBytes < 512 {
			return fmt.Errorf("%s: limits.%s.fileSizeBytes %d: at least 512", pos(p.name), p.name, p.l.FileSizeBytes)
		}
		if (p.name == "session" || p.name == "host") && (p.l.CPUTimeMs != 0 || p.l.FileSizeBytes != 0) {
			return fmt.Errorf("%s: limits.%s: cpuTimeMs and fileSizeBytes apply to each command (limits.command), not to the commands together", pos(p.name), p.name)
		}
	}
	return nil
}

// Model is a named model.
type Model struct {
	// Provider is one of the known providers (openai, openai-chat, anthropic, scripted).
	Provider string `json:"provider"`
	// Model is the provider's model name (for scripted: the script file).
	Model string `json:"model"`
	// BaseURL overrides the provider's endpoint (e.g. http://localhost:11434/v1 for Ollama).
	BaseURL string `json:"baseURL,omitempty"`
	// APIKeyEnv names the environment variable holding the key; empty means the provider's usual one.
	APIKeyEnv string `json:"apiKeyEnv,omitempty"`
	// ContextWindow is the model's context size in tokens: runs compact
	// their conversation before a request would fill CompactAt of it.
	// Zero means the default for known models ([DefaultContextWindow]),
	// else none (compaction only when the provider refuses a request as
	// too long).
	ContextWindow int `json:"contextWindow,omitempty"`
	// CompactAt is the share of ContextWindow (0 < x ≤ 1) a request may
	// fill before a compaction; zero means 0.8.
	CompactAt float64 `json:"compactAt,omitempty"`
	// CompactModel names the model (a named model or "provider:model")
	// that writes compaction summaries; empty means this model.
	CompactModel string `json:"compactModel,omitempty"`
	// MaxTokens caps output tokens per step.
	MaxTokens int `json:"maxTokens,omitempty"`
	// Price is the model's price in US dollars per million tokens; nil
	// means the default for known models ([DefaultPrice]), else none
	// (runs then carry no cost).
	Price *llm.Price `json:"price,omitempty"`
	// ConnectTimeoutMs, FirstByteTimeoutMs and IdleTimeoutMs are the
	// model's [llm.Timeouts] in milliseconds: zero means the default, -1
	// no limit.
	ConnectTimeoutMs   int64 `json:"connectTimeoutMs,omitempty"`
	FirstByteTimeoutMs int64 `json:"firstByteTimeoutMs,omitempty"`
	IdleTimeoutMs      int64 `json:"idleTimeoutMs,omitempty"`
}

// Timeouts are the model's limits on a request's phases.
func (m Model) Timeouts() llm.Timeouts {
	d := func(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
	return llm.Timeouts{Connect: d(m.ConnectTimeoutMs), FirstByte: d(m.FirstByteTimeoutMs), Idle: d(m.IdleTimeoutMs)}
}

// Path returns the configuration file's path from the environment.
func Path(getenv func(string) string) string {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "weft", "config.json")
}

// Load reads the file at path; a missing file is an empty configuration.
// Unknown keys are errors, so a typo does not silently do nothing. Errors
// name the file, and where it can be told the line and column
// (PATH:LINE:COL: …) and the key.
func Load(path string) (File, error) {
	var f File
	if path == "" {
		return f, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("config %s: %w", path, err)
	}
	if f, err = Parse(b); err != nil {
		return f, fmt.Errorf("config %s%w", path, err)
	}
	return f, nil
}

// Keys lists the top-level keys of the file, in the order of docs/config.md.
func Keys() []string {
	return []string{"defaultModel", "store", "maxSteps", "models", "unsandboxed", "network", "limits", "policy", "inputTimeoutMs", "mcpServers", "mcpSessionEnv", "checkpoints", "budgets", "retention"}
}

// modelKeys lists the keys of a named model.
var modelKeys = []string{"provider", "model", "baseURL", "apiKeyEnv", "contextWindow", "compactAt", "compactModel", "maxTokens", "connectTimeoutMs", "firstByteTimeoutMs", "idleTimeoutMs", "price"}

// mcpKeys lists the keys of an MCP server.
func mcpKeys() []string {
	return []string{"command", "args", "env", "cwd", "readOnly", "url", "headers", "trusted"}
}

// Parse decodes and checks a configuration file's bytes. An error begins
// with ":LINE:COL: " when it points at a place in b, else with ": ", so
// that the caller can put the file's name before it.
func Parse(b []byte) (File, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&f)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = fmt.Errorf("more than one JSON value: the file holds one object")
			return f, fmt.Errorf("%s: %w", position(b, dec.InputOffset()), err)
		}
	}
	if err != nil {
		return f, decodeError(b, err)
	}
	if f.Network != "" && f.Network != sandbox.NetworkDeny && f.Network != sandbox.NetworkAllow {
		return f, fmt.Errorf("%s: network %q: want %q or %q", keyPosition(b, "network"), f.Network, sandbox.NetworkDeny, sandbox.NetworkAllow)
	}
	if err := checkLimits(f.Limits, func(key string) string { return keyPosition(b, key) }); err != nil {
		return f, err
	}
	if f.MaxSteps < 0 {
		return f, fmt.Errorf("%s: maxSteps %d: want a positive number (or leave it out for 50)", keyPosition(b, "maxSteps"), f.MaxSteps)
	}
	if c := f.Checkpoints; c.MaxFileBytes < 0 || c.MaxBytes < 0 {
		return f, fmt.Errorf("%s: checkpoints: maxFileBytes and maxBytes want a positive number of bytes (or leave them out for 64 MiB and 1 GiB)", keyPosition(b, "checkpoints"))
	}
	for _, x := range []struct {
		key    string
		budget event.Budget
	}{{"run", f.Budgets.Run}, {"session", f.Budgets.Session}} {
		if err := x.budget.Check("budgets." + x.key); err != nil {
			return f, fmt.Errorf("%s: %w", keyPosition(b, "budgets"), err)
		}
	}
	if err := f.Budgets.Host.CheckHost("budgets.host"); err != nil {
		return f, fmt.Errorf("%s: %w", keyPosition(b, "budgets"), err)
	}
	if _, err := f.Retention.Settings(); err != nil {
		return f, fmt.Errorf("%s: %w", keyPosition(b, "retention"), err)
	}
	if f.InputTimeoutMs < 0 {
		return f, fmt.Errorf("%s: inputTimeoutMs %d: want milliseconds, or 0 for no limit", keyPosition(b, "inputTimeoutMs"), f.InputTimeoutMs)
	}
	names := make([]string, 0, len(f.Models))
	for name := range f.Models {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		m := f.Models[name]
		if m.Provider == "" || m.Model == "" {
			return f, fmt.Errorf("%s: models.%s: provider and model are required", keyPosition(b, name), name)
		}
		if m.CompactAt < 0 || m.CompactAt > 1 {
			return f, fmt.Errorf("%s: models.%s.compactAt %g: want a share of the context window, above 0 and at most 1", keyPosition(b, "compactAt"), name, m.CompactAt)
		}
		if m.ContextWindow < 0 {
			return f, fmt.Errorf("%s: models.%s.contextWindow %d: want tokens", keyPosition(b, "contextWindow"), name, m.ContextWindow)
		}
		if p := m.Price; p != nil {
			for _, r := range []struct {
				key  string
				rate float64
			}{{"inputPerMTok", p.InputPerMTok}, {"outputPerMTok", p.OutputPerMTok}, {"cacheReadPerMTok", p.CacheReadPerMTok},
				{"cacheWritePerMTok", p.CacheWritePerMTok}, {"reasoningPerMTok", p.ReasoningPerMTok}} {
				if r.rate < 0 {
					return f, fmt.Errorf("%s: models.%s.price.%s %g: want US dollars per million tokens, 0 or more", keyPosition(b, r.key), name, r.key, r.rate)
				}
			}
		}
		for _, t := range []struct {
			key string
			ms  int64
		}{{"connectTimeoutMs", m.ConnectTimeoutMs}, {"firstByteTimeoutMs", m.FirstByteTimeoutMs}, {"idleTimeoutMs", m.IdleTimeoutMs}} {
			if t.ms < -1 {
				return f, fmt.Errorf("%s: models.%s.%s %d: want milliseconds, 0 (or leave it out) for the default, or -1 for no limit", keyPosition(b, t.key), name, t.key, t.ms)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.MCPServers)) {
		if err := mcp.Check(name, f.MCPServers[name], mcp.FromConfig, nil); err != nil {
			return f, fmt.Errorf("%s: %w", keyPosition(b, name), err)
		}
	}
	for _, v := range f.MCPSessionEnv {
		if v == "" || strings.ContainsAny(v, "=${}\x00") {
			return f, fmt.Errorf("%s: mcpSessionEnv: %q is not a variable name", keyPosition(b, "mcpSessionEnv"), v)
		}
	}
	if _, err := policy.Compile(f.Policy); err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return f, fmt.Errorf("%s: policy.%s", keyPosition(b, "policy"), ae.Message)
		}
		return f, fmt.Errorf("%s: policy: %w", keyPosition(b, "policy"), err)
	}
	return f, nil
}

// decodeError turns a decoding error into one with a line and column.
func decodeError(b []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("%s: invalid JSON: %s", position(b, syn.Offset), syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: invalid JSON: the file ends in the middle of a value (a missing } or ]?)", position(b, int64(len(b))))
	case errors.Is(err, io.EOF):
		return fmt.Errorf(": the file is empty: write {} or remove it")
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the file"
		}
		return fmt.Errorf("%s: %s: want %s, not a JSON %s", position(b, typ.Offset), field, typ.Type, typ.Value)
	}
	// encoding/json reports an unknown key as `json: unknown field "k"`.
	if k, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		key := strings.Trim(k, `"`)
		off, depth, top := keyOffset(b, key)
		var hint string
		switch {
		case depth == 1:
			hint = "the keys are " + strings.Join(Keys(), ", ")
		case depth == 3 && top == "models":
			hint = "a model's keys are " + strings.Join(modelKeys, ", ")
		case depth == 2 && top == "limits":
			hint = "the keys of limits are " + strings.Join(limitsKeys, ", ")
		case depth == 3 && top == "limits":
			hint = "a limit's keys are " + strings.Join(limitKeys, ", ")
		case depth == 3 && top == "mcpServers":
			hint = "an MCP server's keys are " + strings.Join(mcpKeys(), ", ")
		default:
			hint = "see docs/config.md"
		}
		pos := ""
		if off >= 0 {
			pos = position(b, off)
		}
		return fmt.Errorf("%s: unknown key %q (%s)", pos, key, hint)
	}
	return fmt.Errorf(": %w", err)
}

// keyOffset returns the offset of the first object key named key in b,
// the depth of its object (1 for the top level) and the top-level key it
// is under, or -1.
func keyOffset(b []byte, key string) (int64, int, string) {
	dec := json.NewDecoder(bytes.NewReader(b))
	// expectKey[i] is set when container i is an object whose next token
	// is a key.
	var expectKey []bool
	valueDone := func() { expectKey[len(expectKey)-1] = true }
	isObject := []bool{}
	top := ""
	for {
		off := dec.InputOffset()
		t, err := dec.Token()
		if err != nil {
			return -1, 0, ""
		}
		n := len(expectKey)
		if d, ok := t.(json.Delim); ok {
			switch d {
			case '{', '[':
				expectKey = append(expectKey, d == '{')
				isObject = append(isObject, d == '{')
			case '}', ']':
				expectKey, isObject = expectKey[:n-1], isObject[:n-1]
				if len(isObject) > 0 && isObject[len(isObject)-1] {
					valueDone()
				}
			}
			continue
		}
		if n > 0 && isObject[n-1] && expectKey[n-1] {
			s, _ := t.(string)
			if n == 1 {
				top = s
			}
			if s == key {
				for off < int64(len(b)) && b[off] != '"' {
					off++ // past the separator before the key
				}
				return off, n, top
			}
			expectKey[n-1] = false
			continue
		}
		if n > 0 && isObject[n-1] {
			valueDone()
		}
	}
}

// keyPosition is ":LINE:COL" of key's first occurrence as a key, or "".
func keyPosition(b []byte, key string) string {
	off, _, _ := keyOffset(b, key)
	if off < 0 {
		return ""
	}
	return position(b, off)
}

// position is ":LINE:COL" (1-based, columns in bytes) of offset off in b.
func position(b []byte, off int64) string {
	off = min(max(off, 0), int64(len(b)))
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(b[:off], '\n'))
	return fmt.Sprintf(":%d:%d", line, col)
}
