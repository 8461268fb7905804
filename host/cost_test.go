package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/host"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store/record"
)

// TestRunCost: a model with a price gives its runs a cost that run/get
// shows; one without gives none.
func TestRunCost(t *testing.T) {
	const src = `{"steps":[{"text":"hi","usage":{"inputTokens":1000000,"outputTokens":100000}}]}`
	h, _ := newHostWith(t, func(c *host.Config) {
		c.ResolveModel = func(name string) (*host.Model, error) {
			p, err := scripted.Parse("cost.json", []byte(src))
			if err != nil {
				return nil, err
			}
			m := &host.Model{Name: name, Provider: p, Model: "cost"}
			switch name {
			case "scripted:priced":
				m.Price = &llm.Price{InputPerMTok: 2, OutputPerMTok: 10}
			case "scripted:free":
			default:
				return nil, fmt.Errorf("unknown model %q", name)
			}
			return m, nil
		}
	})
	for _, tc := range []struct {
		model string
		want  float64
	}{{"scripted:priced", 3}, {"scripted:free", 0}} {
		sid := session(t, h, tc.model)
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
		if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
			t.Fatalf("%s: run %+v", tc.model, got)
		}
		g, err := h.GetRun(context.Background(), api.RunIDParams{RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		if g.Usage.CostUSD != tc.want {
			t.Errorf("%s: run/get usage %+v, want cost %g", tc.model, g.Usage, tc.want)
		}
		b, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(string(b), `"costUsd"`); has != (tc.want > 0) {
			t.Errorf("%s: run/get %s: costUsd present %v", tc.model, b, has)
		}
	}
}
