package client_test

import (
	"errors"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/rpc"
	"weft.dev/weft/store/memory"
)

// newHTTPHost serves a host in this process over HTTP with token and
// returns its URL.
func newHTTPHost(t *testing.T, token string) string {
	t.Helper()
	ctx := t.Context()
	h, err := host.New(ctx, host.Config{
		Store: memory.New(), DefaultModel: "scripted:hi",
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse("hi.json", []byte(`{"loop":true,"steps":[{"text":"hi there"}]}`))
			return &host.Model{Name: name, Provider: p, Model: "hi"}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{Token: token}})
	ts := httptest.NewServer(rpc.HTTPHandler(srv, h, rpc.SSEOptions{}))
	t.Cleanup(func() { ts.CloseClientConnections(); srv.Close(); ts.Close(); h.Close() })
	return ts.URL
}

// A client of NewHTTP makes each call one POST to /rpc, from an address
// in any of the forms Dial takes; its errors are typed: a refused token
// is api.ErrUnauthorized, no host is the request's *url.Error, and a
// subscription, which needs a WebSocket, is the host's invalid_request.
func TestNewHTTP(t *testing.T) {
	const token = "t0ken"
	u := newHTTPHost(t, token)
	ctx := t.Context()
	var id string
	for _, addr := range []string{u, u + "/", u + "/rpc", strings.TrimPrefix(u, "http://")} {
		c := client.NewHTTP(addr, client.Options{Token: token, Name: "test"})
		if id == "" {
			s, err := c.CreateSession(ctx, api.CreateSessionParams{Title: "over POST"})
			if err != nil {
				t.Fatalf("%s: session/create: %v", addr, err)
			}
			id = s.ID
		}
		s, err := c.GetSession(ctx, api.SessionGetParams{SessionID: id})
		if err != nil || s.Title != "over POST" {
			t.Errorf("%s: session/get: %+v %v", addr, s, err)
		}
		c.Close()
	}

	c := client.NewHTTP(u, client.Options{Token: token})
	defer c.Close()
	_, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: id})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Kind != api.KindInvalidRequest {
		t.Errorf("subscribe over POST: %v, want invalid_request", err)
	}
	_, err = c.GetSession(ctx, api.SessionGetParams{SessionID: "ses_none"})
	if !errors.Is(err, api.ErrNotFound) {
		t.Errorf("session/get of no session: %v, want not_found", err)
	}

	bad := client.NewHTTP(u, client.Options{Token: "not-it"})
	defer bad.Close()
	if _, err := bad.GetSession(ctx, api.SessionGetParams{SessionID: id}); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("a wrong token: %v, want unauthorized", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	none := client.NewHTTP(down, client.Options{Token: token})
	defer none.Close()
	var ue *url.Error
	if _, err := none.GetSession(ctx, api.SessionGetParams{SessionID: id}); !errors.As(err, &ue) {
		t.Errorf("no host: %v, want a *url.Error", err)
	}
}

// A call cut by the end of the connection, and one made afterwards, are
// client.ErrClosed, which the package exports for errors.Is.
func TestDroppedConnectionIsErrClosed(t *testing.T) {
	u := newHTTPHost(t, "tok")
	ctx := t.Context()
	c, err := client.Dial(ctx, u, client.Options{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	var end error
	for _, err := range sub {
		if err != nil {
			end = err
			break
		}
		c.Close() // after the first event, as a dropped connection would
	}
	if !errors.Is(end, client.ErrClosed) {
		t.Errorf("subscription after the connection ended: %v, want client.ErrClosed", end)
	}
	if _, err := c.GetSession(ctx, api.SessionGetParams{SessionID: s.ID}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("call on a closed client: %v, want client.ErrClosed", err)
	}
}
