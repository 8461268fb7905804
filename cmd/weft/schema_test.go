package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
)

// `weft schema` prints, without a host, the document a host answers to
// rpc.discover: every method of the table, byte for byte the same once
// compacted.
func TestSchemaCommand(t *testing.T) {
	e := newEnv(t)
	out, stderr, code := e.weft("", "schema")
	if code != 0 {
		t.Fatalf("weft schema: exit %d: %s", code, stderr)
	}
	var doc struct {
		OpenRPC string `json:"openrpc"`
		Methods []struct {
			Name string `json:"name"`
		} `json:"methods"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("weft schema printed no JSON: %v", err)
	}
	names := map[string]bool{}
	for _, m := range doc.Methods {
		names[m.Name] = true
	}
	for _, d := range api.Methods() {
		if !names[d.Info().Name] {
			t.Errorf("weft schema: no %s", d.Info().Name)
		}
	}

	c := e.cmd("rpc")
	stdin, _ := c.StdinPipe()
	stdout, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	cl := client.NewStdio(stdout, stdin, client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	served, err := cl.Discover(ctx)
	cl.Close()
	if werr := c.Wait(); werr != nil {
		t.Errorf("weft rpc exited with %v", werr)
	}
	if err != nil {
		t.Fatalf("rpc.discover: %v", err)
	}
	var printed bytes.Buffer
	if err := json.Compact(&printed, []byte(out)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(printed.Bytes(), served) {
		t.Errorf("weft schema differs from the host's rpc.discover (%d and %d bytes)", printed.Len(), len(served))
	}
}
