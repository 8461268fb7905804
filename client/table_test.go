package client_test

import (
	"bufio"
	"encoding/json"
	"io"
	"reflect"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/internal/filled"
	"weft.dev/weft/rpc"
)

// request is one request the fake host received.
type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// wireHost is the other end of a client's stdio: it records each request
// and answers it with an empty object, and a stream method with a
// subscription and one item notification (no end, so that the client's
// breaking out of the stream unsubscribes).
type wireHost struct {
	cl   *client.Client
	reqs chan request
	wg   sync.WaitGroup
}

func newWireHost(t *testing.T) *wireHost {
	t.Helper()
	toHost, fromClient := io.Pipe()
	fromHost, toClient := io.Pipe()
	w := &wireHost{reqs: make(chan request, 8)}
	w.cl = client.NewStdio(fromHost, fromClient, client.Options{})
	var mu sync.Mutex // serialises writes to toClient
	write := func(v any) {
		b, _ := json.Marshal(v)
		mu.Lock()
		defer mu.Unlock()
		toClient.Write(append(b, '\n'))
	}
	w.wg.Go(func() {
		defer toClient.Close()
		sc := bufio.NewScanner(toHost)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r request
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Errorf("fake host: %v: %s", err, sc.Bytes())
				return
			}
			w.reqs <- r
			if r.ID == nil {
				continue
			}
			result := any(struct{}{})
			var note string
			var params any
			sub := "sub_" + r.Method
			switch r.Method {
			case api.EventsSubscribe.Name:
				result = api.SubscribeResult{SubscriptionID: sub}
				note = api.EventsSubscribe.Item
				params = map[string]any{"subscriptionId": sub, "event": map[string]any{"seq": 1, "type": "run.started", "sessionId": "s"}}
			case api.ProcessFollow.Name:
				result = api.SubscribeResult{SubscriptionID: sub}
				note = api.ProcessFollow.Item
				params = api.ProcessOutputNotification{SubscriptionID: sub, Chunk: api.Chunk{Data: []byte("out")}}
			}
			write(map[string]any{"jsonrpc": "2.0", "id": r.ID, "result": result})
			if note != "" {
				write(map[string]any{"jsonrpc": "2.0", "method": note, "params": params})
			}
		}
	})
	t.Cleanup(func() {
		w.cl.Close()
		toHost.Close()
		w.wg.Wait()
	})
	return w
}

// next returns the next request the host received.
func (w *wireHost) next(t *testing.T) request {
	t.Helper()
	select {
	case r := <-w.reqs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the fake host received no request")
		return request{}
	}
}

// The Go client is complete: every method a host serves (what
// rpc.NewHostServer registers, from the table) is one the client sends,
// under the table's wire name and with the params it was given, byte for
// byte. A client method that sends another method's name, or drops or
// renames a param, fails here; one that is missing does not compile
// (client.Client is an api.Host, and each descriptor calls its method).
func TestClientCoversTable(t *testing.T) {
	w := newWireHost(t)
	ctx := t.Context()
	sent := map[string]bool{}
	expect := func(name string, params any) {
		t.Helper()
		r := w.next(t)
		if r.Method != name {
			t.Errorf("sent %s, want %s", r.Method, name)
			return
		}
		sent[name] = true
		want, _ := json.Marshal(params)
		if string(r.Params) != string(want) {
			t.Errorf("%s: sent params %s, want %s", name, r.Params, want)
		}
	}

	for _, d := range api.Methods() {
		info := d.Info()
		switch info.Name {
		case api.MethodInitialize:
			p := api.InitializeParams{ClientInfo: api.Info{Name: "t", Version: "1"}, ProtocolVersion: "x"}
			if _, err := w.cl.Initialize(ctx, p); err != nil {
				t.Errorf("initialize: %v", err)
			}
			expect(info.Name, p)
			continue
		case api.MethodDiscover:
			if _, err := w.cl.Discover(ctx); err != nil {
				t.Errorf("rpc.discover: %v", err)
			}
			expect(info.Name, api.DiscoverParams{})
			continue
		case api.MethodEventsUnsubscribe:
			continue // sent when a stream is left; below
		}
		if info.Conn {
			t.Errorf("%s: a connection's method the client does not know", info.Name)
			continue
		}
		p := d.NewParams()
		filled.Fill(reflect.ValueOf(p).Elem())
		res, err := d.Invoke(ctx, w.cl, p)
		if err != nil {
			t.Errorf("%s: %v", info.Name, err)
			continue
		}
		expect(info.Name, reflect.ValueOf(p).Elem().Interface())
		if !info.Stream() {
			if reflect.TypeOf(res) != reflect.PointerTo(info.Result) {
				t.Errorf("%s: result %T, want *%v", info.Name, res, info.Result)
			}
			continue
		}
		// Take the stream's item, then leave it: the client unsubscribes.
		n := 0
		iterate(res, func(err error) bool {
			if err != nil {
				t.Errorf("%s: stream: %v", info.Name, err)
			}
			n++
			return false
		})
		if n != 1 {
			t.Errorf("%s: %d items, want 1", info.Name, n)
		}
		expect(api.MethodEventsUnsubscribe, api.UnsubscribeParams{SubscriptionID: "sub_" + info.Name})
	}

	s := rpc.NewHostServer(nil, rpc.HostConfig{})
	defer s.Close()
	served := s.Methods()
	if len(served) == 0 {
		t.Fatal("the host server serves nothing")
	}
	for _, m := range served {
		if !sent[m.Name] {
			t.Errorf("a host serves %s; the Go client never sent it", m.Name)
		}
	}
}

// iterate ranges over a stream the table's Invoke returned, an
// iter.Seq2[T, error] of some T, calling f with each error (nil for an
// item) while it returns true.
func iterate(seq any, f func(error) bool) {
	v := reflect.ValueOf(seq)
	yield := reflect.MakeFunc(v.Type().In(0), func(args []reflect.Value) []reflect.Value {
		err, _ := args[1].Interface().(error)
		return []reflect.Value{reflect.ValueOf(f(err))}
	})
	v.Call([]reflect.Value{yield})
}
