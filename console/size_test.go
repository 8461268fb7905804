package console_test

import (
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"weft.dev/weft/console"
)

// TestAssetsSize keeps the embedded console within the 300 KB
// gzipped, and checks that the page loads nothing from elsewhere.
func TestAssetsSize(t *testing.T) {
	var total int64
	cw := &countWriter{}
	zw := gzip.NewWriter(cw)
	fs.WalkDir(console.Assets(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(console.Assets(), path)
		if err != nil {
			t.Fatal(err)
		}
		total += int64(len(b))
		zw.Write(b)
		for _, bad := range []string{"http://", "https://", "//cdn", "fonts.googleapis"} {
			if strings.Contains(string(b), bad) && !strings.HasSuffix(path, ".md") {
				t.Errorf("%s refers to %q: the console loads nothing from elsewhere", path, bad)
			}
		}
		return nil
	})
	zw.Close()
	t.Logf("console assets: %d bytes, %d gzipped", total, cw.n)
	if cw.n > 300<<10 {
		t.Errorf("console assets are %d bytes gzipped, want ≤ 300 KiB", cw.n)
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// TestHandlerHeaders checks the page's security headers and routes.
func TestHandlerHeaders(t *testing.T) {
	hs := httptest.NewServer(console.Handler())
	defer hs.Close()
	for _, p := range []string{"/", "/assets/app.js", "/assets/methods.js", "/assets/style.css", "/assets/rpc.js"} {
		resp, err := http.Get(hs.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		if resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: no Referrer-Policy no-referrer", p)
		}
	}
	resp, err := http.Get(hs.URL + "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /nothing: %d", resp.StatusCode)
	}
}
