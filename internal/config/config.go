// Package config reads weft's optional configuration file and resolves
// "provider:model" names to providers. Only the CLI uses it: library
// packages read no environment or files.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"weft.dev/weft/env/sandbox"
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
}

// Sandbox returns the shell sandbox configuration the file asks for.
func (f File) Sandbox() *sandbox.Config {
	return &sandbox.Config{Unsandboxed: f.Unsandboxed, Network: f.Network}
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
	// ContextWindow is the model's context size in tokens, for display and budgeting.
	ContextWindow int `json:"contextWindow,omitempty"`
	// MaxTokens caps output tokens per step.
	MaxTokens int `json:"maxTokens,omitempty"`
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
// Unknown fields are errors, so a typo does not silently do nothing.
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
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("config %s: %w", path, err)
	}
	if f.Network != "" && f.Network != sandbox.NetworkDeny && f.Network != sandbox.NetworkAllow {
		return f, fmt.Errorf("config %s: network %q: want %q or %q", path, f.Network, sandbox.NetworkDeny, sandbox.NetworkAllow)
	}
	for name, m := range f.Models {
		if m.Provider == "" || m.Model == "" {
			return f, fmt.Errorf("config %s: models.%s: provider and model are required", path, name)
		}
	}
	return f, nil
}
