package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/rpc"
	"weft.dev/weft/store/memory"
)

// A client talks to a host over WebSocket: it starts a run and follows the
// session's events until the run ends.
func Example() {
	ctx := context.Background()
	h, _ := host.New(ctx, host.Config{
		Store: memory.New(), DefaultModel: "scripted:hi",
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse("hi.json", []byte(`{"loop":true,"steps":[{"text":"hi there"}]}`))
			return &host.Model{Name: name, Provider: p, Model: "hi"}, err
		},
	})
	srv := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{Token: "secret"}})
	ts := httptest.NewServer(rpc.HTTPHandler(srv, h, rpc.SSEOptions{}))
	defer func() { ts.CloseClientConnections(); srv.Close(); ts.Close(); h.Close() }()

	c, err := client.Dial(ctx, ts.URL, client.Options{Token: "secret"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	s, _ := c.CreateSession(ctx, api.CreateSessionParams{})
	r, _ := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("hello"))})
	events, _ := c.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID, RunID: r.ID})
	for e, err := range events {
		if err != nil {
			panic(err)
		}
		if e.Type == event.MessageDelta || event.IsTerminalRun(e.Type) {
			fmt.Println(e.Type)
		}
		if event.IsTerminalRun(e.Type) {
			break
		}
	}
	// Output:
	// message.delta
	// run.completed
}
