package config

import (
	"strings"

	"weft.dev/weft/llm"
)

// priceTable returns the list prices of common models in US dollars per
// million tokens, as published by OpenAI, Anthropic and Google in late
// 2025 (the latest the authors knew). Prices drift: a configured price
// (models.NAME.price) overrides these. Long-context tiers (Gemini 2.5
// Pro above 200k prompt tokens) and batch discounts are not modelled.
//
// Each row matches the model names that begin with prefix; the first
// match wins, so a more specific prefix comes before a shorter one.
func priceTable() []struct {
	provider, prefix string
	price            llm.Price
} {
	return []struct {
		provider, prefix string
		price            llm.Price
	}{
		{"openai", "gpt-5-pro", llm.Price{InputPerMTok: 15, OutputPerMTok: 120}},
		{"openai", "gpt-5-mini", llm.Price{InputPerMTok: 0.25, OutputPerMTok: 2, CacheReadPerMTok: 0.025}},
		{"openai", "gpt-5-nano", llm.Price{InputPerMTok: 0.05, OutputPerMTok: 0.40, CacheReadPerMTok: 0.005}},
		{"openai", "gpt-5", llm.Price{InputPerMTok: 1.25, OutputPerMTok: 10, CacheReadPerMTok: 0.125}},
		{"openai", "gpt-4.1-mini", llm.Price{InputPerMTok: 0.40, OutputPerMTok: 1.60, CacheReadPerMTok: 0.10}},
		{"openai", "gpt-4.1-nano", llm.Price{InputPerMTok: 0.10, OutputPerMTok: 0.40, CacheReadPerMTok: 0.025}},
		{"openai", "gpt-4.1", llm.Price{InputPerMTok: 2, OutputPerMTok: 8, CacheReadPerMTok: 0.50}},
		{"openai", "gpt-4o-mini", llm.Price{InputPerMTok: 0.15, OutputPerMTok: 0.60, CacheReadPerMTok: 0.075}},
		{"openai", "gpt-4o", llm.Price{InputPerMTok: 2.50, OutputPerMTok: 10, CacheReadPerMTok: 1.25}},
		{"openai", "o3-mini", llm.Price{InputPerMTok: 1.10, OutputPerMTok: 4.40, CacheReadPerMTok: 0.55}},
		{"openai", "o3-pro", llm.Price{InputPerMTok: 20, OutputPerMTok: 80}},
		{"openai", "o3", llm.Price{InputPerMTok: 2, OutputPerMTok: 8, CacheReadPerMTok: 0.50}},
		{"openai", "o4-mini", llm.Price{InputPerMTok: 1.10, OutputPerMTok: 4.40, CacheReadPerMTok: 0.275}},
		{"anthropic", "claude-opus-4-5", llm.Price{InputPerMTok: 5, OutputPerMTok: 25, CacheReadPerMTok: 0.50, CacheWritePerMTok: 6.25}},
		{"anthropic", "claude-opus-4", llm.Price{InputPerMTok: 15, OutputPerMTok: 75, CacheReadPerMTok: 1.50, CacheWritePerMTok: 18.75}},
		{"anthropic", "claude-sonnet-4", llm.Price{InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.30, CacheWritePerMTok: 3.75}},
		{"anthropic", "claude-haiku-4", llm.Price{InputPerMTok: 1, OutputPerMTok: 5, CacheReadPerMTok: 0.10, CacheWritePerMTok: 1.25}},
		{"anthropic", "claude-3-5-haiku", llm.Price{InputPerMTok: 0.80, OutputPerMTok: 4, CacheReadPerMTok: 0.08, CacheWritePerMTok: 1}},
		{"anthropic", "claude-3-haiku", llm.Price{InputPerMTok: 0.25, OutputPerMTok: 1.25, CacheReadPerMTok: 0.03, CacheWritePerMTok: 0.30}},
		{"gemini", "gemini-2.5-flash-lite", llm.Price{InputPerMTok: 0.10, OutputPerMTok: 0.40, CacheReadPerMTok: 0.01}},
		{"gemini", "gemini-2.5-flash", llm.Price{InputPerMTok: 0.30, OutputPerMTok: 2.50, CacheReadPerMTok: 0.03}},
		{"gemini", "gemini-2.5-pro", llm.Price{InputPerMTok: 1.25, OutputPerMTok: 10, CacheReadPerMTok: 0.125}},
	}
}

// DefaultPrice returns the list price of a known model of provider (see
// priceTable), or nil. A configured price takes precedence; local models
// (openai-chat) and scripted ones have none by default. The caller owns
// the result.
func DefaultPrice(provider, model string) *llm.Price {
	m := strings.ToLower(model)
	for _, row := range priceTable() {
		if row.provider == provider && strings.HasPrefix(m, row.prefix) {
			p := row.price
			return &p
		}
	}
	return nil
}
