package lineedit

import (
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// press returns the key press that String spells s ("a", "enter",
// "alt+enter", "ctrl+w").
func press(s string) tea.KeyPressMsg {
	k := tea.Key{}
	parts := strings.Split(s, "+")
	for _, mod := range parts[:len(parts)-1] {
		switch mod {
		case "alt":
			k.Mod |= tea.ModAlt
		case "ctrl":
			k.Mod |= tea.ModCtrl
		case "shift":
			k.Mod |= tea.ModShift
		}
	}
	switch name := parts[len(parts)-1]; name {
	case "enter":
		k.Code = tea.KeyEnter
	case "backspace":
		k.Code = tea.KeyBackspace
	case "delete":
		k.Code = tea.KeyDelete
	case "left":
		k.Code = tea.KeyLeft
	case "right":
		k.Code = tea.KeyRight
	case "up":
		k.Code = tea.KeyUp
	case "down":
		k.Code = tea.KeyDown
	case "home":
		k.Code = tea.KeyHome
	case "end":
		k.Code = tea.KeyEnd
	default:
		k.Code = []rune(name)[0]
		if k.Mod == 0 {
			k.Text = name
		}
	}
	return tea.KeyPressMsg(k)
}

// typeIn sends each of keys to m: a key name, a key with modifiers, or
// text typed rune by rune.
func typeIn(m Model, keys ...string) Model {
	for _, k := range keys {
		if strings.Contains(k, "+") || slices.Contains([]string{"enter", "backspace", "delete", "left", "right", "up", "down", "home", "end"}, k) {
			m, _ = m.Update(press(k))
			continue
		}
		for _, r := range k {
			m, _ = m.Update(press(string(r)))
		}
	}
	return m
}

func newFocused() Model {
	m := New()
	m.Focus()
	return m
}

// TestPressSpelling: the test's key presses are spelled as the editor's
// key map spells them.
func TestPressSpelling(t *testing.T) {
	for _, s := range []string{"a", "enter", "alt+enter", "ctrl+j", "ctrl+w", "alt+backspace", "left", "home", "delete"} {
		if got := press(s).String(); got != s {
			t.Errorf("press(%q).String() = %q", s, got)
		}
	}
}

// TestEdit: typing, newlines, moves and deletions give the text a person
// means, and Line and LineCount follow the cursor.
func TestEdit(t *testing.T) {
	cases := []struct {
		name string
		keys []string
		want string
		line int
	}{
		{"typed", []string{"hello world"}, "hello world", 0},
		{"newlines", []string{"one", "alt+enter", "two", "ctrl+j", "three"}, "one\ntwo\nthree", 2},
		{"enter is the UI's", []string{"one", "enter", "two"}, "onetwo", 0},
		{"backspace joins lines", []string{"one", "ctrl+j", "backspace", "two"}, "onetwo", 0},
		{"delete joins lines", []string{"one", "ctrl+j", "two", "up", "end", "delete"}, "onetwo", 0},
		{"word back", []string{"one two three", "ctrl+w"}, "one two ", 0},
		{"word forward", []string{"one two three", "home", "alt+d"}, " two three", 0},
		{"to line end", []string{"one two", "home", "alt+f", "ctrl+k"}, "one", 0},
		{"to line start", []string{"one two", "alt+b", "ctrl+u"}, "two", 0},
		{"insert mid-line", []string{"ac", "left", "b"}, "abc", 0},
		{"up and down", []string{"abc", "ctrl+j", "de", "up", "X", "down", "Y"}, "abXc\ndeY", 1},
		{"left wraps lines", []string{"ab", "ctrl+j", "home", "left", "X"}, "abX\n", 0},
		{"ctrl+d is not delete", []string{"ab", "home", "ctrl+d"}, "ab", 0},
	}
	for _, c := range cases {
		m := typeIn(newFocused(), c.keys...)
		if got := m.Value(); got != c.want {
			t.Errorf("%s: value %q, want %q", c.name, got, c.want)
		}
		if m.Line() != c.line {
			t.Errorf("%s: line %d, want %d", c.name, m.Line(), c.line)
		}
		if n := strings.Count(c.want, "\n") + 1; m.LineCount() != n {
			t.Errorf("%s: %d lines, want %d", c.name, m.LineCount(), n)
		}
	}
}

// TestBlurredTakesNoKeys: keys do nothing while blurred.
func TestBlurredTakesNoKeys(t *testing.T) {
	m := typeIn(New(), "abc")
	if m.Value() != "" {
		t.Fatalf("a blurred editor took keys: %q", m.Value())
	}
}

// TestPaste: a paste goes in whole at the cursor, CR LF as one newline,
// tabs as spaces, other control characters dropped; a single line takes
// newlines as spaces; CharLimit cuts what passes it.
func TestPaste(t *testing.T) {
	m := newFocused()
	m, _ = m.Update(tea.PasteMsg{Content: "one\r\ntwo\tx\x07\ny"})
	if got, want := m.Value(), "one\ntwo    x\ny"; got != want {
		t.Errorf("pasted %q, want %q", got, want)
	}
	s := newFocused()
	s.SingleLine = true
	s, _ = s.Update(tea.PasteMsg{Content: "one\ntwo\tthree"})
	s = typeIn(s, "alt+enter")
	if got, want := s.Value(), "one two three"; got != want {
		t.Errorf("single line: pasted %q, want %q", got, want)
	}
	l := newFocused()
	l.CharLimit = 5
	l = typeIn(l, "ab")
	l, _ = l.Update(tea.PasteMsg{Content: "cdefgh"})
	l = typeIn(l, "z")
	if got, want := l.Value(), "abcde"; got != want {
		t.Errorf("limited to 5: %q, want %q", got, want)
	}
}

// TestView: the text wraps at the width (at spaces where it can) with
// the prompt before each row, every row as wide as the editor, and the
// rows shown follow the cursor within MaxHeight.
func TestView(t *testing.T) {
	m := newFocused()
	m.Prompt = func(row int) string {
		if row == 0 {
			return "› "
		}
		return "  "
	}
	m.MaxHeight = 3
	m.SetWidth(12)
	m.Placeholder = "a prompt, or /help"
	if got := ansi.Strip(m.View()); got != "› a prompt, " {
		t.Errorf("placeholder: %q", got)
	}
	m.SetValue("one two three four\nfive")
	rows := strings.Split(ansi.Strip(m.View()), "\n")
	want := []string{"  three     ", "  four      ", "  five      "}
	if !slices.Equal(rows, want) {
		t.Errorf("rows %q, want %q", rows, want)
	}
	for _, r := range rows {
		if w := ansi.StringWidth(r); w != 12 {
			t.Errorf("a row of %d columns, want 12: %q", w, r)
		}
	}
	m.SetValue(strings.Repeat("x", 30))
	for r := range strings.SplitSeq(ansi.Strip(m.View()), "\n") {
		if w := ansi.StringWidth(r); w != 12 {
			t.Errorf("a long word: a row of %d columns, want 12: %q", w, r)
		}
	}
	m.SetValue("日本語のテキストです")
	for r := range strings.SplitSeq(ansi.Strip(m.View()), "\n") {
		if w := ansi.StringWidth(r); w > 12 {
			t.Errorf("wide runes: a row of %d columns: %q", w, r)
		}
	}
	// Up from the last row of a wrapped line stays in the line.
	m.SetValue("aaaa bbbb cccc dddd")
	m = typeIn(m, "up", "X")
	if m.Line() != 0 || !strings.Contains(m.Value(), "X") || m.LineCount() != 1 {
		t.Errorf("up within a wrapped line: %q, line %d", m.Value(), m.Line())
	}
}

// TestSingleLineView: a single line shows the part around the cursor
// that fits the width.
func TestSingleLineView(t *testing.T) {
	m := newFocused()
	m.SingleLine = true
	m.SetWidth(10)
	m.Placeholder = "an answer"
	if got := ansi.Strip(m.View()); got != "an answer" {
		t.Errorf("placeholder: %q", got)
	}
	m = typeIn(m, "0123456789abcdef")
	got := ansi.Strip(m.View())
	if ansi.StringWidth(got) > 10 || !strings.HasSuffix(got, "f ") {
		t.Errorf("the end of a long line: %q", got)
	}
	m = typeIn(m, "home")
	if got := ansi.Strip(m.View()); got != "0123456789" {
		t.Errorf("the start of a long line: %q", got)
	}
}
