package mcp

import (
	"fmt"
	"io"
	"mime"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpTransport makes the streamable HTTP transport of l: its headers
// (with ${VAR} read now) on every request, JSON responses bounded by
// MaxFrameBytes (server-sent events are bounded per event by the SDK),
// over connections of its own that the connection's end closes.
func (m *Manager) httpTransport(l *launch) (sdk.Transport, *http.Transport, error) {
	headers := make(http.Header, len(l.spec.Headers))
	for _, k := range sortedKeys(l.spec.Headers) {
		v, err := expand(l.spec.Headers[k], m.cfg.LookupEnv)
		if err != nil {
			return nil, nil, fmt.Errorf("header %s: %w", k, err)
		}
		headers.Set(k, v)
	}
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, nil, fmt.Errorf("http.DefaultTransport is a %T", http.DefaultTransport)
	}
	tr := base.Clone()
	client := &http.Client{Transport: &roundTripper{base: tr, headers: headers, limit: int64(m.cfg.MaxFrameBytes)}}
	return &sdk.StreamableClientTransport{Endpoint: l.spec.URL, HTTPClient: client, MaxEventSize: m.cfg.MaxFrameBytes}, tr, nil
}

// roundTripper adds the server's headers and bounds JSON responses.
type roundTripper struct {
	base    http.RoundTripper
	headers http.Header
	limit   int64
}

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, vs := range t.headers {
		req.Header[k] = vs
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body = &limitedBody{ReadCloser: resp.Body, limit: t.limit, left: t.limit}
	}
	return resp, nil
}

// limitedBody fails a read past its limit.
type limitedBody struct {
	io.ReadCloser
	limit, left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte more tells a body of exactly the limit from a longer one
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return 0, fmt.Errorf("the response is larger than the %d bytes a message may have", b.limit)
	}
	return n, err
}
