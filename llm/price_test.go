package llm_test

import (
	"math"
	"testing"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// TestPriceCost: usage × price, with cached and reasoning tokens counted as
// the providers report them.
func TestPriceCost(t *testing.T) {
	u := event.TokenUsage{InputTokens: 1_000_000, OutputTokens: 500_000, CacheReadTokens: 400_000, CacheWriteTokens: 100_000, ReasoningTokens: 200_000}
	for _, tc := range []struct {
		name  string
		price llm.Price
		want  float64
	}{
		// Input includes the 500k cached: 500k at 2, 400k at 0.5, 100k at 2.5; output 300k at 8 + 200k at 16.
		{"inclusive", llm.Price{InputPerMTok: 2, OutputPerMTok: 8, CacheReadPerMTok: 0.5, CacheWritePerMTok: 2.5, ReasoningPerMTok: 16, CacheInInput: true},
			1 + 0.2 + 0.25 + 2.4 + 3.2},
		// Input excludes the cached: 1M at 2 plus the cache.
		{"exclusive", llm.Price{InputPerMTok: 2, OutputPerMTok: 8, CacheReadPerMTok: 0.5, CacheWritePerMTok: 2.5, ReasoningPerMTok: 16},
			2 + 0.2 + 0.25 + 2.4 + 3.2},
		// Unset cache and reasoning rates fall back to input and output.
		{"fallback", llm.Price{InputPerMTok: 2, OutputPerMTok: 8, CacheInInput: true}, 2 + 4},
		{"free", llm.Price{}, 0},
	} {
		if got := tc.price.Cost(u); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: cost %g, want %g", tc.name, got, tc.want)
		}
	}
}
