package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/rpc"
)

// The api.Host contract holds for the Go client as for the host in this
// process: a subscription that the host ends because it shuts down ends,
// on the client's side too, with an error of kind overloaded (so that
// code written against api.Host, and rpc serving a client, tells a
// shutdown from a failure).
func TestClientSubscriptionEndsOverloadedOnShutdown(t *testing.T) {
	e := newHostEnv(t)
	c := e.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	var end error
	for _, err := range seq {
		if err != nil {
			end = err
			break
		}
		// The replay's first event is in: shut the host down.
		go e.h.Close()
	}
	if !errors.Is(end, api.ErrOverloaded) {
		t.Fatalf("the subscription ended with %v (%T); want an error of kind overloaded", end, end)
	}
}

// The params schemas say which nested fields a client may leave out as
// the host does: a mount needs only its id (kind defaults to local, mode
// to rw, the host fills a scratch mount's path), a client tool its name
// and input schema. A schema that requires more refuses, in a generated
// client or a validator, requests the host serves.
func TestDocumentNestedRequiredFields(t *testing.T) {
	doc, _ := hostDocument(t)
	at := func(method string, path ...string) map[string]any {
		t.Helper()
		for _, m := range doc.Methods {
			if m.Name != method {
				continue
			}
			s := m.ParamsSchema
			for _, p := range path {
				if p == "[]" {
					s, _ = s["items"].(map[string]any)
				} else {
					props, _ := s["properties"].(map[string]any)
					s, _ = props[p].(map[string]any)
				}
				if s == nil {
					t.Fatalf("%s: no schema at %v", method, path)
				}
			}
			return s
		}
		t.Fatalf("no method %s", method)
		return nil
	}
	required := func(s map[string]any) []string {
		var out []string
		for _, r := range s["required"].([]any) {
			out = append(out, r.(string))
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		method string
		path   []string
		want   []string
	}{
		{"env/mount", []string{"mount"}, []string{"id"}},
		{"session/create", []string{"mounts", "[]"}, []string{"id"}},
		{"session/create", []string{"tools", "[]"}, []string{"inputSchema", "name"}},
		{"run/start", []string{"tools", "[]"}, []string{"inputSchema", "name"}},
	} {
		if got := required(at(c.method, c.path...)); !slices.Equal(got, c.want) {
			t.Errorf("%s %v: required %v, want %v", c.method, c.path, got, c.want)
		}
	}
}

// GET /v1/processes/{id}/output on a host that runs no background
// processes answers 404 not_found, as it did before process/follow moved
// into api.Host: there is no process to show, whatever the ID.
func TestProcessSSEWithoutProcesses(t *testing.T) {
	e := newHostEnv(t)
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/processes/proc_x/output", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Data struct {
				Kind api.Kind `json:"kind"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusNotFound || body.Error.Data.Kind != api.KindNotFound {
		t.Fatalf("status %d, kind %q; want 404 not_found", resp.StatusCode, body.Error.Data.Kind)
	}
}

// initialize's clientInfo is bounded: the name is recorded as who
// answered each request (event.By in approval.resolved, the request's
// record), so a client may not make every answer it gives carry
// megabytes of name.
func TestInitializeClientInfoBounded(t *testing.T) {
	p := startStdio(t, rpc.NewServer(rpc.Config{}))
	long := strings.Repeat("n", api.MaxTitleBytes+1)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"`+long+`"},"protocolVersion":"x"}}`)
	var resp struct {
		Error *api.Error `json:"error"`
	}
	if err := json.Unmarshal([]byte(p.recv(t)), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Error == nil || !errors.Is(resp.Error, api.ErrInvalidParams) || resp.Error.Data["field"] != "clientInfo.name" {
		t.Fatalf("initialize with a %d-byte name: %+v; want invalid_params on clientInfo.name", len(long), resp.Error)
	}
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"clientInfo":{"name":"ok"},"protocolVersion":"x"}}`)
	if line := p.recv(t); !strings.Contains(line, `"result"`) {
		t.Fatalf("initialize with a short name: %s", line)
	}
}

// docs/protocol.md's list of the methods that take an idempotencyKey is
// the table's mutating methods, no more and no fewer.
func TestDocsListEveryMutatingMethod(t *testing.T) {
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "- Every mutating method takes")
	if i < 0 {
		t.Fatal("docs/protocol.md: no list of the mutating methods")
	}
	para := doc[i:]
	para = para[:strings.Index(para, "An exact retry")]
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z]+)/([a-z|]+)`").FindAllStringSubmatch(para, -1) {
		for _, verb := range strings.Split(m[2], "|") {
			listed[m[1]+"/"+verb] = true
		}
	}
	for _, d := range api.Methods() {
		info := d.Info()
		if info.Mutating != listed[info.Name] {
			t.Errorf("%s: mutating %v, listed among the methods that take an idempotencyKey %v", info.Name, info.Mutating, listed[info.Name])
		}
		delete(listed, info.Name)
	}
	for name := range listed {
		t.Errorf("%s: listed, but no method of the table", name)
	}
}
