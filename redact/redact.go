// Package redact removes configured secret values (API keys, the host's
// token, the values an MCP server's ${VAR} names) from what weft stores or
// sends to a model: a session's log, a process's output log, the host's
// own log.
//
// A [Redactor] is built once from the secret values and shared. It finds a
// value as raw text, and inside JSON as encoding/json writes it (with or
// without HTML escaping) and as a JSON string that holds JSON (escaped
// twice), and replaces it with [Mask]. Streams cut into chunks hold back
// the tail of a chunk that may begin a secret ([Redactor.Hold]) so that a
// value split across two chunks is still found.
//
// Values shorter than [MinLen] bytes are not redacted: a short value
// ("1", "true", a port) would mask ordinary text everywhere, and a real
// credential is longer. Values are matched byte for byte: a secret that
// reaches the log transformed (base64, URL-encoded, split by the producer
// with other text between its halves) is not found.
package redact

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
)

// MinLen is the shortest secret value, in bytes, that a [Redactor]
// redacts; shorter values are ignored.
const MinLen = 8

// Mask replaces every secret value found.
const Mask = "[REDACTED]"

// Redactor finds and masks secret values. It is immutable and safe for
// concurrent use. A nil *Redactor redacts nothing.
type Redactor struct {
	// raw are the secret values, the longest first.
	raw [][]byte
	// forms are raw and every encoded form, deduplicated, the longest
	// first (so that a value that contains another is masked whole).
	forms [][]byte
}

// New returns a Redactor of the given secret values. Values shorter than
// [MinLen] bytes, blank ones and duplicates are ignored. It returns nil
// when no value is left, which redacts nothing.
func New(secrets ...string) *Redactor {
	var raw []string
	for _, s := range secrets {
		if len(s) < MinLen || strings.TrimSpace(s) == "" || slices.Contains(raw, s) {
			continue
		}
		raw = append(raw, s)
	}
	if len(raw) == 0 {
		return nil
	}
	r := &Redactor{}
	var forms []string
	add := func(f string) {
		if f != "" && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	for _, s := range raw {
		r.raw = append(r.raw, []byte(s))
		add(s)
		html := jsonString(s, true)
		add(html)
		add(jsonString(s, false))
		add(jsonString(html, true))
		add(jsonString(jsonString(s, false), false))
	}
	longestFirst := func(a, b []byte) int { return len(b) - len(a) }
	slices.SortFunc(r.raw, longestFirst)
	for _, f := range forms {
		r.forms = append(r.forms, []byte(f))
	}
	slices.SortFunc(r.forms, longestFirst)
	return r
}

// With returns a Redactor of r's values and secrets: r itself when
// secrets adds nothing.
func (r *Redactor) With(secrets ...string) *Redactor {
	all := r.Secrets()
	n := len(all)
	for _, s := range secrets {
		if len(s) >= MinLen && strings.TrimSpace(s) != "" && !slices.Contains(all, s) {
			all = append(all, s)
		}
	}
	if len(all) == n {
		return r
	}
	return New(all...)
}

// Secrets returns the values r redacts.
func (r *Redactor) Secrets() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.raw))
	for i, s := range r.raw {
		out[i] = string(s)
	}
	return out
}

// jsonString is s as the inside of a JSON string, as encoding/json
// writes it, with or without HTML escaping.
func jsonString(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		return ""
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return string(out[1 : len(out)-1])
}

// Contains reports whether b holds a secret value in any of its forms.
func (r *Redactor) Contains(b []byte) bool {
	if r == nil {
		return false
	}
	for _, f := range r.forms {
		if bytes.Contains(b, f) {
			return true
		}
	}
	return false
}

// Bytes returns b with every secret value, in any of its forms, replaced
// by [Mask]. It returns b itself, not copied, when there is none.
func (r *Redactor) Bytes(b []byte) []byte {
	if !r.Contains(b) {
		return b
	}
	out := b
	for _, f := range r.forms {
		if bytes.Contains(out, f) {
			out = bytes.ReplaceAll(out, f, []byte(Mask))
		}
	}
	return out
}

// String is [Redactor.Bytes] for a string.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, f := range r.forms {
		if strings.Contains(s, string(f)) {
			return string(r.Bytes([]byte(s)))
		}
	}
	return s
}

// JSON returns the JSON document raw with every secret value inside its
// strings (and keys) replaced by [Mask], and raw itself when there is
// none. The result is valid JSON whenever raw is: a value found outside a
// string (a number that happens to equal a secret) is left alone.
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if !r.Contains(raw) {
		return raw
	}
	out := r.Bytes(raw)
	if json.Valid(out) || !json.Valid(raw) {
		return out
	}
	// A form matched across the document's structure: redact value by
	// value.
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return out
	}
	b, err := json.Marshal(r.value(v))
	if err != nil {
		return out
	}
	return b
}

// value redacts the strings of a decoded JSON value.
func (r *Redactor) value(v any) any {
	switch x := v.(type) {
	case string:
		return r.String(x)
	case []any:
		for i := range x {
			x[i] = r.value(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.String(k)] = r.value(e)
		}
		return out
	}
	return v
}

// Hold returns how many bytes at the end of b may be the beginning of a
// secret value (its raw form): a stream that cuts its text into chunks
// keeps them back and puts them before the next chunk, so that a value
// split across two chunks is found whole. It is at most the longest
// value's length minus one.
func (r *Redactor) Hold(b []byte) int {
	if r == nil {
		return 0
	}
	hold := 0
	for _, s := range r.raw {
		for k := min(len(s)-1, len(b)); k > hold; k-- {
			if bytes.HasSuffix(b, s[:k]) {
				hold = k
				break
			}
		}
	}
	return hold
}

// Handler returns a slog.Handler that redacts the message and the string
// attributes (and errors, and values that format as text) of each record
// before h handles it; h itself when r is nil.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	if r == nil {
		return h
	}
	return &handler{r: r, h: h}
}

type handler struct {
	r *Redactor
	h slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.attr(a)
	}
	return &handler{r: h.r, h: h.h.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, h: h.h.WithGroup(name)}
}

// attr redacts one attribute.
func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, x := range g {
			red[i] = h.attr(x)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		s := v.String()
		if r := h.r.String(s); r != s {
			return slog.String(a.Key, r)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
