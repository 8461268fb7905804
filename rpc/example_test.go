package rpc_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/jsonrpc/client"
	"weft.dev/weft/rpc"
)

type greetParams struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type greetResult struct {
	Greeting string `json:"greeting"`
}

// Register a typed method and serve it over stdio (here, in-memory pipes).
func Example_stdio() {
	s := rpc.NewServer(rpc.Config{ServerInfo: rpc.Info{Name: "example"}})
	rpc.Register(s, "greet", "Greet someone.", func(_ context.Context, p *greetParams) (*greetResult, error) {
		return &greetResult{Greeting: "hello, " + p.Name}, nil
	})

	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"greet","params":{"name":"ada"}}
{"jsonrpc":"2.0","id":2,"method":"greet","params":{"name":"ada","age":36}}
`)
	outR, outW := io.Pipe()
	go func() {
		_ = s.ServeStdio(context.Background(), in, outW)
		outW.Close()
	}()
	var lines []string
	sc := bufio.NewScanner(outR)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	// Requests run concurrently; sort by id for a stable output.
	if strings.Contains(lines[0], `"id":2`) {
		lines[0], lines[1] = lines[1], lines[0]
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"greeting":"hello, ada"}}
	// {"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"unknown field \"age\"","data":{"field":"age","kind":"invalid_params","retryable":false}}}
}

// Serve over HTTP and call with the Go client; error responses are *api.Error.
func Example_http() {
	s := rpc.NewServer(rpc.Config{Token: "t0ken"})
	rpc.Register(s, "greet", "Greet someone.", func(_ context.Context, p *greetParams) (*greetResult, error) {
		if p.Name == "" {
			return nil, api.NewError(api.KindNotFound, "nobody to greet")
		}
		return &greetResult{Greeting: "hello, " + p.Name}, nil
	})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Close()

	c := client.NewHTTP(hs.URL+"/rpc", client.Config{Token: "t0ken"})
	defer c.Close()
	var res greetResult
	if err := c.Call(context.Background(), "greet", greetParams{Name: "ada"}, &res); err != nil {
		fmt.Println(err)
	}
	fmt.Println(res.Greeting)
	err := c.Call(context.Background(), "greet", greetParams{}, &res)
	if e, ok := err.(*api.Error); ok {
		fmt.Println(e.Code, e.Kind, e.Retryable)
	}
	// Output:
	// hello, ada
	// -32010 not_found false
}
