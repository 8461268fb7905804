// Package console is weft's web console: a static page, embedded in the
// binary, that watches, steers and approves sessions through the public
// protocol only (WebSocket JSON-RPC at /rpc/ws, SSE), so that everything
// it shows or does a client can.
//
// The page is plain hand-written JavaScript modules with no build step
// and nothing loaded from elsewhere (no CDN, no fonts). Its list of
// methods, methods.js, is generated from the method table ([Methods]
// writes it; a test checks the committed file), so it cannot drift from
// the protocol.
//
// The page logs in through the host's /console/ endpoints (package rpc):
// `weft console` prints a URL whose fragment holds a one-time code, and
// the page exchanges it for an HttpOnly session cookie.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:generate go test -run ^TestMethodsJS$ -update

//go:embed static
var static embed.FS

// Assets returns the console's files: index.html at the root, the rest
// under assets/.
func Assets() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	return sub
}

// index is the page itself.
var index = must(static.ReadFile("static/index.html"))

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	return b
}

// contentSecurityPolicy allows the page only its own scripts, styles and
// connections, and no framing (clickjacking of the approve button).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the console: GET / is the page, GET /assets/NAME its
// files. It sets a strict Content-Security-Policy and no-referrer, so a
// login code in the URL's fragment cannot leak. It is safe for
// concurrent use and needs no authentication: the page holds no data.
func Handler() http.Handler {
	files := http.FileServerFS(Assets())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		switch {
		case r.URL.Path == "/":
			// ServeFileFS would redirect /index.html to /, and back.
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write(index)
		case strings.HasPrefix(r.URL.Path, "/assets/"):
			files.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}
