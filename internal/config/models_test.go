package config

import (
	"errors"
	"testing"

	"weft.dev/weft/api"
)

// A missing API key is a typed error naming the variable to set: the
// provider's, or the one a named model's apiKeyEnv gives.
func TestResolveMissingKey(t *testing.T) {
	f := File{Models: map[string]Model{"mine": {Provider: "anthropic", Model: "claude-x", APIKeyEnv: "MY_KEY"}}}
	noEnv := func(string) string { return "" }
	for _, tc := range []struct{ spec, env, model string }{
		{"openai:gpt-x", "OPENAI_API_KEY", "openai:gpt-x"},
		{"anthropic:claude-x", "ANTHROPIC_API_KEY", "anthropic:claude-x"},
		{"mine", "MY_KEY", "anthropic:claude-x"},
	} {
		_, err := Resolve(tc.spec, f, "config.json", noEnv)
		var ae *api.Error
		if !errors.As(err, &ae) || !errors.Is(err, api.ErrInvalidParams) || ae.Data["env"] != tc.env || ae.Data["model"] != tc.model {
			t.Errorf("%s: %v (data %v)", tc.spec, err, ae)
		}
	}
	// With the key, or a local OpenAI-compatible server, the model resolves.
	if _, err := Resolve("anthropic:claude-x", f, "config.json", func(k string) string {
		return map[string]string{"ANTHROPIC_API_KEY": "sk"}[k]
	}); err != nil {
		t.Errorf("with the key: %v", err)
	}
	if _, err := Resolve("openai-chat:llama", f, "config.json", func(k string) string {
		return map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}[k]
	}); err != nil {
		t.Errorf("a local server: %v", err)
	}
}
