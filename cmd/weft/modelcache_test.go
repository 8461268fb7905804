package main

import (
	"errors"
	"fmt"
	"testing"

	"weft.dev/weft/internal/config"
	"weft.dev/weft/llm/scripted"
)

// TestModelCacheKeepsProviders: a host resolves a model name once and
// reuses its provider for every later run, each run getting a Model of
// its own; a failure is resolved again, a scripted model always is, and
// no more than maxKeptModels names are kept.
func TestModelCacheKeepsProviders(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
	calls := map[string]int{}
	fail := true
	c := newModelCache(func(name string) (*config.Resolved, error) {
		calls[name]++
		if name == "openai-chat:flaky" && fail {
			fail = false
			return nil, errors.New("not yet")
		}
		if name == "scripted" {
			p, err := scripted.Parse("script", []byte(`{"steps":[{"text":"hi"}]}`))
			if err != nil {
				return nil, err
			}
			return &config.Resolved{Name: "scripted:script", Provider: p}, nil
		}
		return config.Resolve(name, config.File{}, "", func(k string) string { return env[k] })
	})

	a, err := c.resolve("openai-chat:m")
	if err != nil {
		t.Fatal(err)
	}
	a.MaxTokens = 99
	b, err := c.resolve("openai-chat:m")
	if err != nil {
		t.Fatal(err)
	}
	if a.Provider != b.Provider {
		t.Error("the provider was made anew for the second run")
	}
	if a == b || b.MaxTokens == 99 {
		t.Error("runs share one Model: a change by one reaches the next")
	}
	if calls["openai-chat:m"] != 1 {
		t.Errorf("resolved %d times, want 1", calls["openai-chat:m"])
	}

	if _, err := c.resolve("openai-chat:flaky"); err == nil {
		t.Fatal("the first resolution should fail")
	}
	if _, err := c.resolve("openai-chat:flaky"); err != nil {
		t.Fatalf("a failure was kept: %v", err)
	}

	s1, err := c.resolve("scripted")
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := c.resolve("scripted")
	if s1.Provider == s2.Provider {
		t.Error("a scripted provider, whose state belongs to one run, was kept")
	}

	for i := range maxKeptModels + 5 {
		if _, err := c.resolve(fmt.Sprintf("openai-chat:n%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.models); n > maxKeptModels {
		t.Errorf("keeps %d models, at most %d", n, maxKeptModels)
	}
}
