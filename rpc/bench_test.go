package rpc_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"weft.dev/weft/internal/jsonrpc/client"
	"weft.dev/weft/rpc"
)

func benchServer(b *testing.B) *rpc.Server {
	s := rpc.NewServer(rpc.Config{NoAuth: true})
	rpc.Register(s, "echo", "Echo.", func(_ context.Context, p *echoParams) (*echoResult, error) {
		return &echoResult{Text: p.Text}, nil
	})
	return s
}

func benchCalls(b *testing.B, c *client.Client) {
	ctx := context.Background()
	p := echoParams{Text: "hi"}
	var r echoResult
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if err := c.Call(ctx, "echo", p, &r); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "req/s")
}

func BenchmarkRoundTripStdio(b *testing.B) {
	s := benchServer(b)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = s.ServeStdio(ctx, inR, outW)
		outW.Close()
		close(done)
	}()
	c := client.NewStdio(outR, inW, client.Config{})
	benchCalls(b, c)
	c.Close()
	cancel()
	<-done
}

func BenchmarkRoundTripHTTP(b *testing.B) {
	s := benchServer(b)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Close()
	c := client.NewHTTP(hs.URL+"/rpc", client.Config{HTTPClient: hs.Client()})
	defer c.Close()
	benchCalls(b, c)
}

func BenchmarkRoundTripWebSocket(b *testing.B) {
	s := benchServer(b)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Close()
	c, err := client.DialWebSocket(context.Background(), "ws"+strings.TrimPrefix(hs.URL, "http")+"/rpc/ws", client.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchCalls(b, c)
}
