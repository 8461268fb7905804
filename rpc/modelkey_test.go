package rpc_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/config"
	"weft.dev/weft/rpc"
	"weft.dev/weft/store/memory"
)

// A model whose API key the host lacks is -32602 with the variable to set
// in error.data.env (and the model in data.model), so that a client can
// tell its user exactly what to set.
func TestMissingAPIKeyOverTheWire(t *testing.T) {
	h, err := host.New(context.Background(), host.Config{
		Store: memory.New(), DefaultModel: "anthropic:claude-x",
		ResolveModel: func(name string) (*host.Model, error) {
			m, err := config.Resolve(name, config.File{}, "config.json", func(string) string { return "" })
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: m.Name, Provider: m.Provider, Model: m.Model}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{Token: token}})
	srv := httptest.NewServer(rpc.HTTPHandler(s, h, rpc.SSEOptions{}))
	defer func() {
		srv.CloseClientConnections()
		s.Close()
		srv.Close()
		h.Close()
	}()
	c, err := client.Dial(context.Background(), srv.URL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	_, err = c.CreateSession(ctx, api.CreateSessionParams{Model: "openai:gpt-x"})
	if e := wireErr(t, err, api.CodeInvalidParams); e.Data["env"] != "OPENAI_API_KEY" || e.Data["model"] != "openai:gpt-x" || e.Data["field"] != "model" {
		t.Errorf("session/create: %v %v", e, e.Data)
	}
	ses, err := c.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.StartRun(ctx, api.StartRunParams{SessionID: ses.ID, Input: api.Input(event.TextParts("hi"))})
	if e := wireErr(t, err, api.CodeInvalidParams); e.Data["env"] != "ANTHROPIC_API_KEY" || e.Data["field"] != "model" {
		t.Errorf("run/start on the host's default model: %v %v", e, e.Data)
	}
}
