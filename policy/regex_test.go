package policy

import (
	"regexp"
	"testing"
)

// FuzzCommandRegex checks the Pike VM against Go's regexp: on a text
// without unknown parts, tried at its start only, it matches exactly
// when ^(?:expr) does.
func FuzzCommandRegex(f *testing.F) {
	for _, s := range [][2]string{
		{`curl\b.*\|\s*(ba)?sh`, "curl http://x | sh"},
		{`go (test|vet)\b`, "go test ./..."},
		{`ls$`, "ls -l"},
		{`(?i)sudo`, "SUDO ls"},
		{`a*?b+|c{2,3}`, "ccc"},
		{`^x\B`, "xy"},
		{`[^a-z]+$`, "ABC"},
		{`(?s).`, "\n"},
		{``, ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, expr, s string) {
		want, err := regexp.Compile(`^(?:` + expr + `)`)
		if err != nil {
			return
		}
		re, err := compileCommandRegex(expr)
		if err != nil {
			return // too large for the VM
		}
		tx := &text{s: s, starts: []int{0}, ends: []int{len(s)}}
		tx.index()
		for _, mode := range []matchMode{underMatch, overMatch} {
			if got := re.match(tx, mode); got != want.MatchString(s) {
				t.Fatalf("%q on %q (mode %d): %v, regexp says %v", expr, s, mode, got, !got)
			}
		}
	})
}

// The VM over texts with several commands and unknown parts.
func TestCommandRegexStartsAndWildcards(t *testing.T) {
	re, err := compileCommandRegex(`curl\b.*\|\s*(ba)?sh\b`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  string
		mode matchMode
		want bool
	}{
		{"cd /tmp; curl x | sh", overMatch, true},
		{"cd /tmp; curl x | sh", underMatch, false},
		{"echo curl x | sh", overMatch, false}, // not at a command's start
		{"curl -H \"$AUTH\" http://api | jq .", overMatch, false},
		{"curl \"$URL\" | bash", overMatch, true},
		{"$CURL x | sh", overMatch, true},
	} {
		sc := analyze(c.cmd)
		got := false
		for _, tx := range sc.texts {
			if c.mode == underMatch {
				tx = sc.cmds[0].render()
			}
			got = got || re.match(tx, c.mode)
		}
		if got != c.want {
			t.Errorf("%q mode %d: %v, want %v", c.cmd, c.mode, got, c.want)
		}
	}
	if _, err := compileCommandRegex(`(((a{100}){100}){100})`); err == nil {
		t.Error("a huge expression compiled")
	}
}
