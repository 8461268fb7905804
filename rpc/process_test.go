package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/process"
	"weft.dev/weft/rpc"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

// denyOthers lets only the owner cancel.
type denyOthers struct{}

func (denyOthers) AllowCancel(_ context.Context, p record.Process, c process.Caller) error {
	if c.SessionID != p.SessionID {
		return errors.New("only the owner may cancel")
	}
	return nil
}

func newProcEnv(t *testing.T) (*host.Host, *httptest.Server) {
	t.Helper()
	st := memory.New()
	return newProcEnvWith(t, st, process.Config{Store: st, Policy: denyOthers{}, KillGrace: 200 * time.Millisecond})
}

// newProcEnvWith is a host on st whose process manager is made by pc,
// served over httptest.
func newProcEnvWith(t *testing.T, st store.Store, pc process.Config) (*host.Host, *httptest.Server) {
	t.Helper()
	m, err := process.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), host.Config{Store: st, Processes: m,
		ResolveModel: func(name string) (*host.Model, error) { return nil, fmt.Errorf("no models") }})
	if err != nil {
		t.Fatal(err)
	}
	s := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{Token: token}})
	srv := httptest.NewServer(rpc.HTTPHandler(s, h, rpc.SSEOptions{}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		s.Close()
		srv.Close()
		h.Close()
	})
	return h, srv
}

func TestProcessOverTheWire(t *testing.T) {
	h, srv := newProcEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.URL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	owner, _ := c.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: t.TempDir(), Default: true}}})
	other, _ := c.CreateSession(ctx, api.CreateSessionParams{})
	p, err := c.StartProcess(ctx, api.ProcessStartParams{SessionID: owner.ID, Command: "for i in 1 2 3; do echo n$i; sleep 0.02; done"})
	if err != nil {
		t.Fatal(err)
	}
	// Follow over WebSocket from offset 0 to the end.
	seq, err := c.FollowProcess(ctx, api.ProcessFollowParams{ID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for ch, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		got.Write(ch.Data)
	}
	if got.String() != "n1\nn2\nn3\n" {
		t.Fatalf("followed %q", got.String())
	}
	// SSE from an offset, resumed by Last-Event-ID semantics.
	req, _ := http.NewRequest("GET", srv.URL+"/v1/processes/"+p.ID+"/output?offset=3", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sse strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "{}" {
			var ch api.Chunk
			if err := json.Unmarshal([]byte(d), &ch); err != nil {
				t.Fatal(err)
			}
			sse.Write(ch.Data)
		}
	}
	if sse.String() != "n2\nn3\n" {
		t.Fatalf("SSE from offset 3: %q", sse.String())
	}
	// Another session: the process does not exist for it.
	_, err = c.GetProcess(ctx, api.ProcessIDParams{ID: p.ID, SessionID: other.ID})
	var re *api.Error
	if !errors.As(err, &re) || re.Code != api.CodeNotFound {
		t.Fatalf("other session's get: %v", err)
	}
	// A granted session may see it but the policy refuses its cancel: -32018.
	q, err := c.StartProcess(ctx, api.ProcessStartParams{SessionID: owner.ID, Command: "sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.GrantProcess(ctx, api.ProcessGrantParams{ID: q.ID, ToSessionID: other.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CancelProcess(ctx, api.ProcessCancelParams{ID: q.ID, SessionID: other.ID})
	if !errors.As(err, &re) || re.Code != api.CodeDenied || !strings.Contains(re.Message, "only the owner") {
		t.Fatalf("denied cancel: %v", err)
	}
	r, err := c.CancelProcess(ctx, api.ProcessCancelParams{ID: q.ID, SessionID: owner.ID})
	if err != nil || r.Status != record.ProcessCancelled {
		t.Fatalf("owner's cancel: %+v %v", r, err)
	}
	// Bad params.
	err = c.Call(ctx, "process/start", map[string]any{"sessionId": owner.ID}, nil)
	if !errors.As(err, &re) || re.Code != api.CodeInvalidParams {
		t.Fatalf("start without command or tool: %v", err)
	}
}
