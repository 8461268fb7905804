package redact_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"weft.dev/weft/redact"
)

// A host builds one Redactor from its secret values and masks them in
// everything it stores: raw text, and JSON, where a value may appear
// escaped (here inside a JSON string that holds JSON).
func Example() {
	r := redact.New("sk-live-0123456789", "tok_abcdefgh", "short")
	fmt.Println(r.String("curl -H 'Authorization: Bearer sk-live-0123456789' https://api.example.com"))
	fmt.Println(string(r.JSON(json.RawMessage(`{"args":"{\"token\":\"tok_abcdefgh\"}","n":1}`))))
	fmt.Println(len(r.Secrets()), "secrets; values shorter than", redact.MinLen, "bytes are not redacted")
	// Output:
	// curl -H 'Authorization: Bearer [REDACTED]' https://api.example.com
	// {"args":"{\"token\":\"[REDACTED]\"}","n":1}
	// 2 secrets; values shorter than 8 bytes are not redacted
}

// A stream cut into chunks (a process's output, a model's text) keeps
// back the end of each chunk that may begin a secret, so that a value
// split between two chunks is still found.
func ExampleRedactor_Hold() {
	r := redact.New("tok_abcdefgh")
	var held []byte
	for _, chunk := range []string{"token is tok_abc", "defgh, done"} {
		b := append(held, chunk...)
		n := r.Hold(b)
		out, rest := b[:len(b)-n], b[len(b)-n:]
		fmt.Printf("%q\n", r.Bytes(out))
		held = append([]byte(nil), rest...)
	}
	fmt.Printf("%q\n", r.Bytes(held)) // at the end of the stream
	// Output:
	// "token is "
	// "[REDACTED], done"
	// ""
}

// The host's own log goes through the same Redactor.
func ExampleRedactor_Handler() {
	r := redact.New("sk-live-0123456789")
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{} // a stable output for the example
		}
		return a
	}})
	log := slog.New(r.Handler(h))
	log.Info("provider refused the key sk-live-0123456789", "header", "Bearer sk-live-0123456789")
	// Output:
	// level=INFO msg="provider refused the key [REDACTED]" header="Bearer [REDACTED]"
}
