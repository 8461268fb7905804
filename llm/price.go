package llm

import "weft.dev/weft/event"

// Price is a model's list price in US dollars per million tokens. It
// turns a step's [event.TokenUsage] into a cost (see [Price.Cost]).
//
// A zero CacheReadPerMTok or CacheWritePerMTok means cached tokens cost
// what input tokens do; a zero ReasoningPerMTok means reasoning tokens
// cost what output tokens do.
type Price struct {
	InputPerMTok      float64 `json:"inputPerMTok"`
	OutputPerMTok     float64 `json:"outputPerMTok"`
	CacheReadPerMTok  float64 `json:"cacheReadPerMTok,omitempty"`
	CacheWritePerMTok float64 `json:"cacheWritePerMTok,omitempty"`
	ReasoningPerMTok  float64 `json:"reasoningPerMTok,omitempty"`
	// CacheInInput says whether the provider's InputTokens already count
	// the cache reads and writes (OpenAI, Gemini) or count only the
	// uncached input (Anthropic). The host sets it from the provider; a
	// configuration does not.
	CacheInInput bool `json:"-"`
}

// Cost returns the cost in US dollars of u at p.
//
// Tokens count as the providers report them (see [event.TokenUsage]):
// cached tokens are charged at the cache rates and, when CacheInInput,
// taken out of InputTokens first; reasoning tokens are part of
// OutputTokens, so they are charged at ReasoningPerMTok instead of
// OutputPerMTok when that is set.
func (p Price) Cost(u event.TokenUsage) float64 {
	or := func(rate, def float64) float64 {
		if rate == 0 {
			return def
		}
		return rate
	}
	input := u.InputTokens
	if p.CacheInInput {
		input = max(0, input-u.CacheReadTokens-u.CacheWriteTokens)
	}
	reasoning := min(u.ReasoningTokens, u.OutputTokens)
	output := u.OutputTokens - reasoning
	usd := float64(input)*p.InputPerMTok +
		float64(u.CacheReadTokens)*or(p.CacheReadPerMTok, p.InputPerMTok) +
		float64(u.CacheWriteTokens)*or(p.CacheWritePerMTok, p.InputPerMTok) +
		float64(output)*p.OutputPerMTok +
		float64(reasoning)*or(p.ReasoningPerMTok, p.OutputPerMTok)
	return usd / 1e6
}
