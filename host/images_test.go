package host_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

func encodeImage(t *testing.T, mediaType string) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var b bytes.Buffer
	var err error
	if mediaType == "image/jpeg" {
		err = jpeg.Encode(&b, img, nil)
	} else {
		err = png.Encode(&b, img)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestImagesEndToEnd: an image in run/start's input is in the log's
// message.user and reaches the model; an MCP tool's image result is an
// attachment of tool.call.completed and reaches the model at the next
// step; a bad image is refused with invalid_params and writes nothing.
func TestImagesEndToEnd(t *testing.T) {
	shot := encodeImage(t, "image/jpeg")
	srv := sdk.NewServer(&sdk.Implementation{Name: "cam", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "shot", Description: "Takes a screenshot."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "the screen:"}, &sdk.ImageContent{Data: shot, MIMEType: "image/jpeg"}}}, nil, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)

	h := mcpScriptHost(t, memory.New(), `{"steps":[{"text":"I see {{images}}.","toolCalls":[{"name":"mcp__cam__shot"}]},{"text":"Now {{images}}."}]}`)
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{MCPServers: map[string]event.MCPServer{"cam": {URL: ts.URL}}, Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}

	// Bad images: each refused before anything is written.
	pic := encodeImage(t, "image/png")
	for name, part := range map[string]event.Part{
		"unsupported type": {Type: event.PartImage, MediaType: "image/bmp", Data: pic},
		"undecodable":      {Type: event.PartImage, MediaType: "image/png", Data: []byte("not a png")},
		"over the limit":   {Type: event.PartImage, MediaType: "image/png", Data: append(bytes.Clone(pic), make([]byte, event.MaxImageBytes)...)},
	} {
		_, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input{part}})
		if !errors.Is(err, api.ErrInvalidParams) {
			t.Errorf("%s: err = %v, want invalid_params", name, err)
		}
	}
	if runs, err := h.ListRuns(ctx, api.ListRunsParams{SessionID: s.ID}); err != nil || len(runs.Runs) != 0 {
		t.Fatalf("runs after refused input: %+v %v", runs, err)
	}

	in := api.Input{{Type: event.PartText, Text: "what is on the screen?"}, {Type: event.PartImage, MediaType: "image/png", Data: pic}}
	r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: in})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("status %s", got.Status)
	}
	evs, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, e := range evs.Events {
		switch e.Type {
		case event.MessageUser:
			var d event.MessageUserData
			if err := e.Decode(&d); err != nil || len(d.Content) != 2 || !bytes.Equal(d.Content[1].Data, pic) {
				t.Errorf("message.user %+v %v", d, err)
			}
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			if err := e.Decode(&d); err != nil || len(d.Attachments) != 1 || !bytes.Equal(d.Attachments[0].Data, shot) ||
				!strings.Contains(d.Output, "[image 1 attached: image/jpeg") {
				t.Errorf("tool.call.completed %+v %v", d, err)
			}
		case event.MessageCompleted:
			var d event.MessageCompletedData
			if err := e.Decode(&d); err != nil {
				t.Fatal(err)
			}
			texts = append(texts, d.Text)
		}
	}
	want := []string{"I see image/png " + strconv.Itoa(len(pic)) + " bytes.", "Now image/jpeg " + strconv.Itoa(len(shot)) + " bytes."}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("the model said %q, want %q", texts, want)
	}
}
