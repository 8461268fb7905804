package host_test

import (
	"context"
	"fmt"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store/memory"
)

// A host over the in-memory store with the offline scripted model: create
// a session, start a run in the background, wait for it, read its log.
func Example() {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{
		Store: memory.New(),
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse("hello.json", []byte(`{"loop":true,"steps":[{"text":"Hello, {{input}}!"}]}`))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: p, Model: "hello"}, nil
		},
		DefaultModel: "scripted:hello",
	})
	if err != nil {
		panic(err)
	}
	defer h.Close()

	s, _ := h.CreateSession(ctx, api.CreateSessionParams{Title: "demo"})
	r, _ := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("world"))})
	w, _ := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 5000})
	fmt.Println("status:", w.Run.Status)

	page, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID})
	for _, e := range page.Events {
		if e.Type == event.MessageCompleted {
			var d event.MessageCompletedData
			e.Decode(&d)
			fmt.Println("answer:", d.Text)
		}
	}
	// Output:
	// status: completed
	// answer: Hello, world!
}
