package config

import (
	"strings"
	"testing"

	"weft.dev/weft/llm"
)

// TestResolvePrice: a configured price wins; known models have their list
// price; local and scripted models have none; Anthropic's input excludes
// cached tokens, the others' includes them.
func TestResolvePrice(t *testing.T) {
	f := File{Models: map[string]Model{
		"mine": {Provider: "openai", Model: "gpt-5", Price: &llm.Price{InputPerMTok: 9, OutputPerMTok: 99}},
	}}
	env := func(name string) string {
		if strings.HasSuffix(name, "_KEY") {
			return "key"
		}
		return ""
	}
	for _, tc := range []struct {
		spec      string
		in, out   float64
		inclusive bool
	}{
		{"mine", 9, 99, true},
		{"openai:gpt-5", 1.25, 10, true},
		{"openai:gpt-5-mini", 0.25, 2, true},
		{"openai:gpt-4o-mini", 0.15, 0.60, true},
		{"openai:gpt-4o", 2.50, 10, true},
		{"openai:gpt-4.1", 2, 8, true},
		{"openai:o3", 2, 8, true},
		{"openai:o4-mini", 1.10, 4.40, true},
		{"anthropic:claude-sonnet-4-5", 3, 15, false},
		{"anthropic:claude-opus-4-1", 15, 75, false},
		{"anthropic:claude-haiku-4-5", 1, 5, false},
		{"gemini:gemini-2.5-pro", 1.25, 10, true},
		{"gemini:gemini-2.5-flash", 0.30, 2.50, true},
	} {
		r, err := Resolve(tc.spec, f, "config.json", env)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if p := r.Price; p == nil || p.InputPerMTok != tc.in || p.OutputPerMTok != tc.out || p.CacheInInput != tc.inclusive {
			t.Errorf("%s: price %+v, want in %g out %g cacheInInput %v", tc.spec, p, tc.in, tc.out, tc.inclusive)
		}
	}
	if r, err := Resolve("openai-chat:llama3", f, "config.json", env); err != nil || r.Price != nil {
		t.Errorf("openai-chat:llama3: price %+v, err %v; want none", r.Price, err)
	}
}

// TestParsePriceErrors: a negative rate or one that is not a number is a
// configuration error that names the key.
func TestParsePriceErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{`{"models":{"x":{"provider":"openai","model":"gpt-5","price":{"inputPerMTok":-1,"outputPerMTok":2}}}}`, "models.x.price.inputPerMTok -1"},
		{`{"models":{"x":{"provider":"openai","model":"gpt-5","price":{"inputPerMTok":1,"outputPerMTok":2,"reasoningPerMTok":-0.5}}}}`, "models.x.price.reasoningPerMTok -0.5"},
		{`{"models":{"x":{"provider":"openai","model":"gpt-5","price":{"inputPerMTok":"cheap"}}}}`, "inputPerMTok"},
		{`{"models":{"x":{"provider":"openai","model":"gpt-5","price":{"inPerMTok":1}}}}`, "inPerMTok"},
	} {
		_, err := Parse([]byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.file, err, tc.want)
		}
	}
	f, err := Parse([]byte(`{"models":{"x":{"provider":"openai","model":"gpt-5","price":{"inputPerMTok":1,"outputPerMTok":2,"cacheReadPerMTok":0.1}}}}`))
	if err != nil || f.Models["x"].Price.CacheReadPerMTok != 0.1 {
		t.Errorf("valid price: %+v, %v", f.Models["x"].Price, err)
	}
}

// TestParseBudgets: the default budgets parse; a negative limit, one that
// is not a number, or an unknown policy is a configuration error that
// names the key.
func TestParseBudgets(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{`{"budgets":{"run":{"costUsd":-1}}}`, "budgets.run.costUsd -1"},
		{`{"budgets":{"session":{"steps":-2}}}`, "budgets.session.steps -2"},
		{`{"budgets":{"run":{"onBudget":"pause"}}}`, "budgets.run.onBudget"},
		{`{"budgets":{"run":{"tokens":"many"}}}`, "tokens"},
		{`{"budgets":{"host":{"wallTimeMs":1000}}}`, "budgets.host.wallTimeMs"},
		{`{"budgets":{"host":{"costUsd":5,"onBudget":"ask"}}}`, "budgets.host.onBudget"},
		{`{"budgets":{"hosts":{"tokens":1}}}`, "hosts"},
	} {
		_, err := Parse([]byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.file, err, tc.want)
		}
	}
	f, err := Parse([]byte(`{"budgets":{"run":{"costUsd":2.5,"onBudget":"ask"},"session":{"tokens":1000000,"wallTimeMs":3600000}}}`))
	if err != nil || f.Budgets.Run.CostUSD != 2.5 || f.Budgets.Run.OnBudget != "ask" || f.Budgets.Session.Tokens != 1e6 {
		t.Errorf("valid budgets: %+v, %v", f.Budgets, err)
	}
}
