package jsonstr

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// Append escapes as json.Marshal does, for any bytes.
func TestAppendAsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "<", ">", "&", `"`, `\`, "\n", "\b", "\f", "\x00", "\x1f", "\x7f",
		"é", "\u2028", "\u2029", "\xff", "\xe2\x80", "😀", "/", " "}
	for range 2000 {
		var sb strings.Builder
		for range r.IntN(12) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := sb.String()
		want, _ := json.Marshal(s)
		if got := Append(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	}
}
