package redact_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"weft.dev/weft/redact"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	plain  = "sk-test-0123456789abcdef"
	quirky = `p&ss<w>rd"\x`
)

// Every form a value takes in stored JSON is masked: raw text, JSON
// with and without HTML escaping, JSON inside a JSON string; the result
// stays valid JSON; short values are ignored.
func TestRedactsEveryForm(t *testing.T) {
	r := redact.New(plain, quirky, "short", plain)
	if got := r.Secrets(); len(got) != 2 {
		t.Fatalf("Secrets = %q", got)
	}
	inner, _ := json.Marshal(map[string]string{"stderr": "token=" + quirky + " and " + plain})
	for name, doc := range map[string]any{
		"plain":  map[string]string{"output": "key " + plain + " short"},
		"quirky": map[string]string{"output": "pw " + quirky},
		"nested": map[string]string{"output": string(inner)},
		"key":    map[string]int{plain: 1},
	} {
		raw, _ := json.Marshal(doc)
		got := r.JSON(raw)
		if !json.Valid(got) || r.Contains(got) || bytes.Contains(got, []byte("0123456789abcdef")) || !bytes.Contains(got, []byte(redact.Mask)) {
			t.Errorf("%s: %s -> %s", name, raw, got)
		}
		if name == "plain" && !bytes.Contains(got, []byte("short")) {
			t.Errorf("a value shorter than MinLen was masked: %s", got)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]string{"x": quirky})
	if got := r.JSON(b.Bytes()); r.Contains(got) || !json.Valid(got) {
		t.Errorf("without HTML escaping: %s", got)
	}
	if got := r.String("a " + quirky + " b"); got != "a "+redact.Mask+" b" {
		t.Errorf("String = %q", got)
	}
	clean := []byte(`{"output":"nothing here"}`)
	if got := r.JSON(clean); &got[0] != &clean[0] {
		t.Error("a document without secrets was copied")
	}
}

// A value that is a number in the document is left alone rather than
// breaking it; the same value in a string is masked.
func TestJSONStaysValid(t *testing.T) {
	r := redact.New("12345678")
	got := r.JSON([]byte(`{"n":12345678,"s":"pin 12345678"}`))
	if !json.Valid(got) || !strings.Contains(string(got), `"s":"pin [REDACTED]"`) || !strings.Contains(string(got), "12345678") {
		t.Fatalf("JSON = %s", got)
	}
}

// A value that contains another is masked whole.
func TestLongestFirst(t *testing.T) {
	r := redact.New("abcdefgh", "xxabcdefghxx")
	if got := r.String("<xxabcdefghxx> <abcdefgh>"); got != "<[REDACTED]> <[REDACTED]>" {
		t.Fatalf("String = %q", got)
	}
}

// Hold keeps back the end of a chunk that may begin a value.
func TestHold(t *testing.T) {
	r := redact.New(plain)
	for _, tc := range []struct {
		chunk string
		want  int
	}{
		{"hello", 0},
		{"hello s", 1},
		{"hello sk-te", 5},
		{"hello " + plain, 0},
		{"k-test", 0},
		{plain[:len(plain)-1], len(plain) - 1},
	} {
		if got := r.Hold([]byte(tc.chunk)); got != tc.want {
			t.Errorf("Hold(%q) = %d, want %d", tc.chunk, got, tc.want)
		}
	}
	var nilR *redact.Redactor
	if nilR.Hold([]byte("s")) != 0 || nilR.String(plain) != plain || nilR.Contains([]byte(plain)) {
		t.Error("a nil Redactor redacts")
	}
}

// The log handler masks messages, attributes, groups and errors.
func TestHandler(t *testing.T) {
	r := redact.New(plain)
	var b bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&b, nil))).With("k", plain)
	log.Info("saw "+plain, "line", "x "+plain, "err", errString("failed: "+plain), slog.Group("g", "v", plain))
	if strings.Contains(b.String(), plain) || strings.Count(b.String(), redact.Mask) != 5 {
		t.Fatalf("log: %s", b.String())
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// BenchmarkJSON measures the cost the journal pays per event, with the
// secrets of a typical host (two provider keys, the token, two MCP
// variables): an event of 16 KiB (the largest delta) and one of 200 bytes
// with no secret in them (the usual case), and the large one with one.
func BenchmarkJSON(b *testing.B) {
	r := redact.New(plain, "sk-ant-api03-0123456789abcdefghij", "AKIAIOSFODNN7EXAMPLE",
		"ghp_0123456789abcdefghijklmnopqrstuvwxyz", "Tq3kVw9ZbN1xR8pL2mYc7sHd")
	text := strings.Repeat("the quick brown fox jumps over the lazy dog ", 16<<10/44)
	clean, _ := json.Marshal(map[string]string{"output": text})
	small, _ := json.Marshal(map[string]string{"output": text[:200]})
	dirty, _ := json.Marshal(map[string]string{"output": text + plain})
	for name, doc := range map[string][]byte{"16KiB": clean, "200B": small, "16KiB-secret": dirty} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				r.JSON(doc)
			}
		})
	}
}
