package host_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

// A host gives memory back to the operating system once it has been
// quiet for MemoryIdle, once per quiet spell: not while it commits, and
// not again until it has committed something.
func TestQuietHostGivesMemoryBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := host.New(context.Background(), host.Config{
			Store: memory.New(), CoalesceWindow: time.Millisecond, MemoryIdle: 2 * time.Second,
			ResolveModel: func(name string) (*host.Model, error) {
				p, err := scripted.Parse("fast.json", []byte(scripts["fast"]))
				if err != nil {
					return nil, err
				}
				return &host.Model{Name: name, Provider: p, Model: "fast"}, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		released := func(want int64) {
			t.Helper()
			synctest.Wait()
			if got := host.Released(h); got != want {
				t.Fatalf("memory given back %d times, want %d", got, want)
			}
		}
		// Ticks every second; offsets of half a second keep the test's
		// wake-ups apart from them.
		time.Sleep(4500 * time.Millisecond)
		released(1) // the quiet spell since the start
		time.Sleep(10 * time.Second)
		released(1) // once per spell
		sid := session(t, h, "scripted:fast")
		r, err := h.StartRun(context.Background(), api.StartRunParams{SessionID: sid, Input: input("hi")})
		if err != nil {
			t.Fatal(err)
		}
		if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
			t.Fatalf("run %s: %s", r.ID, got.Status)
		}
		time.Sleep(1500 * time.Millisecond)
		released(1) // committed less than MemoryIdle ago
		time.Sleep(3 * time.Second)
		released(2)
		time.Sleep(10 * time.Second)
		released(2)
	})
}
