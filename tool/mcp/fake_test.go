package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net"
	"os"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeEnv selects the fake server the test binary runs as (see TestMain).
const fakeEnv = "WEFT_MCP_FAKE"

// fakeServer runs a fake MCP server on stdin and stdout and returns its
// exit status:
//
//   - "tools": echo, add, sleep, crash, big, image, structured, fail,
//     grow, readfile and dial (see newFakeServer);
//   - "badschema": those and a tool whose schema does not compile;
//   - "hugelist": 200 tools with 8 KiB descriptions;
//   - "nostart": writes to stderr and exits 3 at once;
//   - "garbage": answers the handshake, then tools/list with a line
//     that is not JSON.
func fakeServer(mode string) int {
	switch mode {
	case "nostart":
		fmt.Fprintln(os.Stderr, "loading configuration")
		fmt.Fprintln(os.Stderr, "fatal: cannot open /nonexistent/db: no such file or directory")
		return 3
	case "garbage":
		return garbageServer()
	}
	s := newFakeServer(mode)
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "fake server:", err)
		return 1
	}
	return 0
}

func newFakeServer(mode string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "fake", Version: "1"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	type echoIn struct {
		Text string `json:"text"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes text."}, func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return text(in.Text), nil, nil
	})
	type addIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Adds a and b."}, func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, any, error) {
		return text(fmt.Sprint(in.A + in.B)), nil, nil
	})
	type sleepIn struct {
		Ms int `json:"ms"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "sleep", Description: "Sleeps."}, func(ctx context.Context, _ *sdk.CallToolRequest, in sleepIn) (*sdk.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(in.Ms) * time.Millisecond):
		case <-ctx.Done():
		}
		return text("slept"), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Exits mid-call."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "panic: the fake server crashes as asked")
		os.Exit(2)
		return nil, nil, nil
	})
	type bigIn struct {
		N int `json:"n"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "big", Description: "Returns n bytes."}, func(_ context.Context, _ *sdk.CallToolRequest, in bigIn) (*sdk.CallToolResult, any, error) {
		return text(strings.Repeat("x", in.N)), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "image", Description: "Returns an image."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a picture:"}, &sdk.ImageContent{Data: onePixelPNG(), MIMEType: "image/png"},
			&sdk.ImageContent{Data: []byte("\x89PNG...."), MIMEType: "image/png"}, &sdk.ImageContent{Data: []byte("<svg/>"), MIMEType: "image/svg+xml"}}}, nil, nil
	})
	type weather struct {
		City  string  `json:"city"`
		TempC float64 `json:"tempC"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "structured", Description: "Returns structured content."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, weather, error) {
		return nil, weather{City: "Oslo", TempC: -3.5}, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Fails."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("the disk is on fire")
	})
	sdk.AddTool(s, &sdk.Tool{Name: "grow", Description: "Adds a tool."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		sdk.AddTool(s, &sdk.Tool{Name: "grown", Description: "Was added."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return text("grown"), nil, nil
		})
		return text("added"), nil, nil
	})
	type readIn struct {
		Path string `json:"path"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "readfile", Description: "Reads a file."}, func(_ context.Context, _ *sdk.CallToolRequest, in readIn) (*sdk.CallToolResult, any, error) {
		b, err := os.ReadFile(in.Path)
		if err != nil {
			return nil, nil, err
		}
		return text(string(b)), nil, nil
	})
	type dialIn struct {
		Network string `json:"network"`
		Addr    string `json:"addr"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "dial", Description: "Sends a datagram or connects."}, func(_ context.Context, _ *sdk.CallToolRequest, in dialIn) (*sdk.CallToolResult, any, error) {
		c, err := net.DialTimeout(in.Network, in.Addr, 2*time.Second)
		if err != nil {
			return nil, nil, err
		}
		defer c.Close()
		if _, err := c.Write([]byte("ping")); err != nil {
			return nil, nil, err
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 16)); err != nil {
			return nil, nil, err
		}
		return text("reached"), nil, nil
	})
	switch mode {
	case "badschema":
		s.AddTool(&sdk.Tool{Name: "bad", Description: "Has a broken schema.", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"#/nowhere"}}}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return text("unreachable"), nil
			})
	case "hugelist":
		for i := range 200 {
			s.AddTool(&sdk.Tool{Name: fmt.Sprintf("t%d", i), Description: strings.Repeat("d", 8<<10), InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return text("t"), nil })
		}
	}
	return s
}

// garbageServer answers server/discover with "method not found" and
// initialize properly, then every other request with a line that is not
// JSON.
func garbageServer() int {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		switch req.Method {
		case "initialize":
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"garbage","version":"1"}}}`+"\n", req.ID)
		case "server/discover":
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", req.ID)
		default:
			fmt.Println(`{this is not JSON-RPC}`)
		}
	}
	return 0
}

// onePixelPNG is a 1×1 PNG image.
func onePixelPNG() []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		panic(err)
	}
	return b.Bytes()
}
