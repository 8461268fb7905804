package config

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"

	"weft.dev/weft/api"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/anthropic"
	"weft.dev/weft/llm/gemini"
	"weft.dev/weft/llm/openai"
	"weft.dev/weft/llm/scripted"
)

// Providers lists the known provider prefixes.
func Providers() []string {
	return []string{"anthropic", "gemini", "openai", "openai-chat", "scripted"}
}

// Resolved is a model ready to use.
type Resolved struct {
	// Name is the "provider:model" name recorded on runs.
	Name     string
	Provider llm.Provider
	// Model is the provider's model name.
	Model     string
	MaxTokens int
	// ContextWindow is the model's context window in tokens: the
	// configured one, else [DefaultContextWindow]'s; zero if unknown.
	ContextWindow int
	// CompactAt and CompactModel are the model's configured ones (see
	// [Model]).
	CompactAt    float64
	CompactModel string
	// Price is the model's price: the configured one, else
	// [DefaultPrice]'s; nil if unknown.
	Price *llm.Price
}

// DefaultContextWindow returns the context window, in tokens, of a known
// model of provider (its published limit), or zero. A configured
// contextWindow takes precedence; local models (openai-chat) have none
// by default, since the server decides.
func DefaultContextWindow(provider, model string) int {
	m := strings.ToLower(model)
	has := func(prefixes ...string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(m, p) {
				return true
			}
		}
		return false
	}
	switch provider {
	case "openai":
		switch {
		case has("gpt-5"):
			return 400_000
		case has("gpt-4.1"):
			return 1_047_576
		case has("o1", "o3", "o4"):
			return 200_000
		case has("gpt-4o", "gpt-4-turbo"):
			return 128_000
		}
	case "anthropic":
		if has("claude-") {
			return 200_000
		}
	case "gemini":
		if has("gemini-1.5", "gemini-2", "gemini-3") {
			return 1_048_576
		}
	}
	return 0
}

// errNoModel explains how to configure a model.
const errNoModel = "no model configured: pass -m PROVIDER:MODEL (e.g. -m openai:gpt-5.1, -m anthropic:claude-sonnet-4-5, -m gemini:gemini-2.5-flash, " +
	"-m openai-chat:llama3 with OPENAI_BASE_URL, or -m scripted:examples/quickstart.json), set WEFT_MODEL, " +
	"or set defaultModel in %s"

// Resolve turns a model name — a named model of f, or "provider:model" —
// into a provider. getenv supplies API keys and base URLs.
//
// A missing API key is an *api.Error of kind invalid_params whose data
// holds "env", the variable the key is read from, and "model", the
// model's "provider:model" name: a client of a host tells its user what
// to set from it. Other errors say what is wrong in their message.
func Resolve(spec string, f File, configPath string, getenv func(string) string) (*Resolved, error) {
	return ResolveHTTP(spec, f, configPath, getenv, nil)
}

// ResolveHTTP is [Resolve] with the HTTP client the provider sends
// through (nil means http.DefaultClient): a host shares one among its
// models, with a pool sized for many sessions at once (see
// [weft.dev/weft/internal/llmhttp.NewPooledClient]).
func ResolveHTTP(spec string, f File, configPath string, getenv func(string) string, hc *http.Client) (*Resolved, error) {
	if spec == "" {
		return nil, fmt.Errorf(errNoModel, configPath)
	}
	m, named := f.Models[spec]
	if !named {
		prov, model, ok := strings.Cut(spec, ":")
		if !ok || model == "" {
			return nil, fmt.Errorf("model %q: want PROVIDER:MODEL (providers: %s) or a model named in %s", spec, strings.Join(Providers(), ", "), configPath)
		}
		m = Model{Provider: prov, Model: model}
	}
	r := &Resolved{Name: m.Provider + ":" + m.Model, Model: m.Model, MaxTokens: m.MaxTokens,
		ContextWindow: m.ContextWindow, CompactAt: m.CompactAt, CompactModel: m.CompactModel}
	if r.ContextWindow == 0 {
		r.ContextWindow = DefaultContextWindow(m.Provider, m.Model)
	}
	if m.Price != nil {
		p := *m.Price
		r.Price = &p
	} else {
		r.Price = DefaultPrice(m.Provider, m.Model)
	}
	if r.Price != nil {
		// Anthropic counts cached tokens apart from the input; OpenAI
		// and Gemini count them in it.
		r.Price.CacheInInput = m.Provider != "anthropic"
	}
	key := func(def string) (string, error) {
		v := def
		if m.APIKeyEnv != "" {
			v = m.APIKeyEnv
		}
		k := getenv(v)
		if k == "" {
			return "", api.Errorf(api.KindInvalidParams, "model %s: no API key: set %s", r.Name, v).
				With("env", v).With("model", r.Name)
		}
		return k, nil
	}
	base := func(def string) string {
		if m.BaseURL != "" {
			return m.BaseURL
		}
		return getenv(def)
	}
	var err error
	switch m.Provider {
	case "openai", "openai-chat":
		baseURL := base("OPENAI_BASE_URL")
		k, kerr := key("OPENAI_API_KEY")
		if kerr != nil {
			// Local OpenAI-compatible servers (Ollama, llama.cpp, vLLM) need no key.
			if baseURL == "" || m.Provider == "openai" && strings.Contains(baseURL, "api.openai.com") {
				return nil, kerr
			}
			k = "unused"
		}
		cfg := openai.Config{APIKey: k, BaseURL: baseURL, Timeouts: m.Timeouts(), HTTPClient: hc}
		if m.Provider == "openai" {
			r.Provider, err = openai.NewResponses(cfg)
		} else {
			r.Provider, err = openai.NewChat(cfg)
		}
	case "anthropic":
		k, kerr := key("ANTHROPIC_API_KEY")
		if kerr != nil {
			return nil, kerr
		}
		r.Provider, err = anthropic.New(anthropic.Config{APIKey: k, BaseURL: base("ANTHROPIC_BASE_URL"), Timeouts: m.Timeouts(), HTTPClient: hc})
	case "gemini":
		k, kerr := key("GEMINI_API_KEY")
		if kerr != nil && m.APIKeyEnv == "" {
			// The other name Google's SDKs read.
			k = getenv("GOOGLE_API_KEY")
			kerr = api.Errorf(api.KindInvalidParams, "model %s: no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY)", r.Name).
				With("env", "GEMINI_API_KEY").With("model", r.Name)
		}
		if k == "" {
			return nil, kerr
		}
		r.Provider, err = gemini.New(gemini.Config{APIKey: k, BaseURL: base("GEMINI_BASE_URL"), Timeouts: m.Timeouts(), HTTPClient: hc})
	case "scripted":
		var p *scripted.Provider
		if p, err = scripted.Load(m.Model); err == nil {
			r.Provider = p
			if r.ContextWindow == 0 {
				r.ContextWindow = p.ContextWindow()
			}
		}
	default:
		known := Providers()
		sort.Strings(known)
		return nil, fmt.Errorf("model %q: unknown provider %q (known: %s)", spec, m.Provider, strings.Join(known, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", r.Name, err)
	}
	return r, nil
}

// KeyEnv returns the names of the environment variables that hold the
// providers' API keys for f: each provider's usual one and every named
// model's apiKeyEnv. The host redacts their values from what it stores
// and sends to models.
func KeyEnv(f File) []string {
	names := []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"}
	for _, name := range slices.Sorted(maps.Keys(f.Models)) {
		if k := f.Models[name].APIKeyEnv; k != "" && !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	return names
}
