// Package lineedit is the terminal UI's text editor: a Bubble Tea
// component that edits a few lines of text, wraps them at a width and
// draws a blinking cursor.
//
// It stands in for bubbles' textarea and textinput, which link a
// clipboard library whose package initialisation looks for six programs
// on PATH in every weft process, whatever the command. Pasting needs no
// clipboard: the terminal's bracketed paste arrives as a [tea.PasteMsg].
package lineedit

import (
	"slices"
	"strings"
	"unicode"

	"charm.land/bubbles/v2/cursor"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// Model is the editor's state. The zero value is not ready for use: make
// one with [New]. A Model is a value, as Bubble Tea's components are: it
// is used by one goroutine, and Update returns the next one.
type Model struct {
	// Placeholder is shown, dimmed, while the text is empty.
	Placeholder string
	// CharLimit bounds the text in runes; 0 means no bound.
	CharLimit int
	// MaxHeight bounds the rows shown; the text scrolls within them to
	// keep the cursor in view. 0 means one row.
	MaxHeight int
	// SingleLine keeps the text on one line: a newline typed or pasted
	// becomes a space, and View shows one row, scrolled sideways to keep
	// the cursor in view, with no prompt and no padding.
	SingleLine bool
	// Prompt returns what starts the visual row row (0 the first of the
	// text, not of the rows shown). Nil means no prompt. Every prompt
	// must be as wide as the first.
	Prompt func(row int) string
	// KeyMap says which keys do what.
	KeyMap KeyMap

	lines    [][]rune
	row, col int
	width    int
	focus    bool
	cur      cursor.Model
}

// KeyMap names the keys of each editing action, as [tea.KeyPressMsg]'s
// String spells them.
type KeyMap struct {
	CharacterForward, CharacterBackward   []string
	WordForward, WordBackward             []string
	LineNext, LinePrevious                []string
	LineStart, LineEnd                    []string
	InsertNewline                         []string
	DeleteCharacterBackward               []string
	DeleteCharacterForward                []string
	DeleteWordBackward, DeleteWordForward []string
	DeleteAfterCursor, DeleteBeforeCursor []string
}

// DefaultKeyMap is the keys of bubbles' textarea, but for Ctrl+V (no
// clipboard: the terminal pastes), Ctrl+D (the UI's exit) and Enter (the
// UI's send): a newline is Alt+Enter, Ctrl+J or Shift+Enter.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		CharacterForward:        []string{"right", "ctrl+f"},
		CharacterBackward:       []string{"left", "ctrl+b"},
		WordForward:             []string{"alt+right", "ctrl+right", "alt+f"},
		WordBackward:            []string{"alt+left", "ctrl+left", "alt+b"},
		LineNext:                []string{"down"},
		LinePrevious:            []string{"up"},
		LineStart:               []string{"home", "ctrl+a"},
		LineEnd:                 []string{"end", "ctrl+e"},
		InsertNewline:           []string{"alt+enter", "ctrl+j", "shift+enter"},
		DeleteCharacterBackward: []string{"backspace", "ctrl+h"},
		DeleteCharacterForward:  []string{"delete"},
		DeleteWordBackward:      []string{"alt+backspace", "ctrl+w", "ctrl+backspace"},
		DeleteWordForward:       []string{"alt+delete", "alt+d", "ctrl+delete"},
		DeleteAfterCursor:       []string{"ctrl+k"},
		DeleteBeforeCursor:      []string{"ctrl+u"},
	}
}

// promptStyle is the style of the prompt.
func promptStyle() lipgloss.Style { return lipgloss.NewStyle().Foreground(lipgloss.Color("7")) }

// placeholderStyle is the style of the placeholder.
func placeholderStyle() lipgloss.Style {
	return lipgloss.NewStyle().Foreground(lipgloss.Color("240"))
}

// New returns an empty, blurred editor 40 columns wide that shows one
// row.
func New() Model {
	cur := cursor.New()
	cur.Style = lipgloss.NewStyle().Foreground(lipgloss.Color("7"))
	return Model{
		MaxHeight: 1,
		KeyMap:    DefaultKeyMap(),
		lines:     [][]rune{nil},
		width:     40,
		cur:       cur,
	}
}

// Blink is the command that starts the cursor's blinking.
func Blink() tea.Msg { return cursor.Blink() }

// SetWidth sets the columns the editor takes, prompt included.
func (m *Model) SetWidth(w int) { m.width = max(1, w) }

// Focus gives the editor the keys: Update edits, the cursor shows. It
// returns the command that blinks the cursor.
func (m *Model) Focus() tea.Cmd {
	m.focus = true
	return m.cur.Focus()
}

// Blur takes the keys away: Update ignores them, the cursor hides.
func (m *Model) Blur() {
	m.focus = false
	m.cur.Blur()
}

// Focused reports whether the editor has the keys.
func (m Model) Focused() bool { return m.focus }

// Value returns the text, its lines joined by newlines.
func (m Model) Value() string {
	var b strings.Builder
	for i, l := range m.lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(string(l))
	}
	return b.String()
}

// SetValue replaces the text with s and puts the cursor at its end.
func (m *Model) SetValue(s string) {
	m.Reset()
	m.insert([]rune(s))
}

// InsertString inserts s at the cursor.
func (m *Model) InsertString(s string) { m.insert([]rune(s)) }

// Reset empties the text.
func (m *Model) Reset() {
	m.lines = [][]rune{nil}
	m.row, m.col = 0, 0
}

// Line returns the line of the text the cursor is on, from 0.
func (m Model) Line() int { return m.row }

// LineCount returns the number of lines of the text.
func (m Model) LineCount() int { return len(m.lines) }

// length returns the text's length in runes, newlines counted.
func (m Model) length() int {
	n := len(m.lines) - 1
	for _, l := range m.lines {
		n += len(l)
	}
	return n
}

// Update handles a key press or a paste when focused, and the cursor's
// blinking.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	if !m.focus {
		var cmd tea.Cmd
		m.cur, cmd = m.cur.Update(msg)
		return m, cmd
	}
	row, col := m.row, m.col
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		m.key(msg)
	case tea.PasteMsg:
		m.insert([]rune(msg.Content))
	}
	var cmd tea.Cmd
	m.cur, cmd = m.cur.Update(msg)
	if m.row != row || m.col != col {
		// The cursor shows as soon as it moves.
		m.cur.IsBlinked = false
		cmd = m.cur.Blink()
	}
	return m, cmd
}

// key does what the key press msg names, or types its text.
func (m *Model) key(msg tea.KeyPressMsg) {
	k := msg.String()
	in := func(keys []string) bool { return slices.Contains(keys, k) }
	km := m.KeyMap
	line := m.lines[m.row]
	switch {
	case in(km.InsertNewline):
		if !m.SingleLine {
			m.insert([]rune{'\n'})
		}
	case in(km.CharacterForward):
		if m.col < len(line) {
			m.col++
		} else if m.row < len(m.lines)-1 {
			m.row, m.col = m.row+1, 0
		}
	case in(km.CharacterBackward):
		if m.col > 0 {
			m.col--
		} else if m.row > 0 {
			m.row--
			m.col = len(m.lines[m.row])
		}
	case in(km.WordForward):
		m.col = wordEnd(line, m.col)
	case in(km.WordBackward):
		m.col = wordStart(line, m.col)
	case in(km.LineStart):
		m.col = 0
	case in(km.LineEnd):
		m.col = len(line)
	case in(km.LineNext):
		m.vertical(1)
	case in(km.LinePrevious):
		m.vertical(-1)
	case in(km.DeleteCharacterBackward):
		if m.col > 0 {
			m.cut(m.col-1, m.col)
		} else if m.row > 0 {
			m.joinPrevious()
		}
	case in(km.DeleteCharacterForward):
		if m.col < len(line) {
			m.cut(m.col, m.col+1)
		} else if m.row < len(m.lines)-1 {
			m.row++
			m.col = 0
			m.joinPrevious()
		}
	case in(km.DeleteWordBackward):
		m.cut(wordStart(line, m.col), m.col)
	case in(km.DeleteWordForward):
		m.cut(m.col, wordEnd(line, m.col))
	case in(km.DeleteAfterCursor):
		m.cut(m.col, len(line))
	case in(km.DeleteBeforeCursor):
		m.cut(0, m.col)
	default:
		if msg.Text != "" {
			m.insert([]rune(msg.Text))
		}
	}
}

// cut removes the runes [from, to) of the cursor's line and puts the
// cursor at from.
func (m *Model) cut(from, to int) {
	l := m.lines[m.row]
	m.lines[m.row] = append(l[:from:from], l[to:]...)
	m.col = from
}

// joinPrevious joins the cursor's line to the one before it, the cursor
// at the join.
func (m *Model) joinPrevious() {
	prev := m.lines[m.row-1]
	m.col = len(prev)
	m.lines[m.row-1] = append(prev[:len(prev):len(prev)], m.lines[m.row]...)
	m.lines = append(m.lines[:m.row], m.lines[m.row+1:]...)
	m.row--
}

// insert inserts rs at the cursor, as typed or pasted: a CR LF or a lone
// CR is a newline, a tab four spaces (one in a single line), other
// control characters are dropped, and what passes CharLimit is cut.
func (m *Model) insert(rs []rune) {
	var clean []rune
	for i, r := range rs {
		switch {
		case r == '\r' && i+1 < len(rs) && rs[i+1] == '\n':
		case r == '\r' || r == '\n':
			if m.SingleLine {
				clean = append(clean, ' ')
			} else {
				clean = append(clean, '\n')
			}
		case r == '\t':
			if m.SingleLine {
				clean = append(clean, ' ')
			} else {
				clean = append(clean, ' ', ' ', ' ', ' ')
			}
		case r == unicode.ReplacementChar, unicode.IsControl(r):
		default:
			clean = append(clean, r)
		}
	}
	if m.CharLimit > 0 {
		clean = clean[:max(0, min(len(clean), m.CharLimit-m.length()))]
	}
	if len(clean) == 0 {
		return
	}
	line := m.lines[m.row]
	tail := append([]rune(nil), line[m.col:]...)
	line = line[:m.col]
	for _, r := range clean {
		if r == '\n' {
			m.lines[m.row] = line
			m.lines = slices.Insert(m.lines, m.row+1, []rune(nil))
			m.row++
			line = nil
			continue
		}
		line = append(line, r)
	}
	m.col = len(line)
	m.lines[m.row] = append(line, tail...)
}

// vertical moves the cursor dir visual rows down (up when negative),
// keeping its place in the row as far as the row allows.
func (m *Model) vertical(dir int) {
	rows := m.rows(m.textWidth())
	at := m.cursorRow(rows)
	to := at + dir
	if to < 0 || to >= len(rows) {
		return
	}
	off := m.col - rows[at].start
	r := rows[to]
	end := r.end
	if to+1 < len(rows) && rows[to+1].line == r.line {
		end-- // the cursor at a wrapped row's end shows on the next row
	}
	m.row, m.col = r.line, min(r.start+off, max(end, r.start))
}

// visualRow is a row of the text as drawn: the runes [start, end) of
// line line.
type visualRow struct{ line, start, end int }

// promptWidth returns the width of the prompt.
func (m Model) promptWidth() int {
	if m.Prompt == nil {
		return 0
	}
	return ansi.StringWidth(m.Prompt(0))
}

// textWidth returns the columns the text wraps at: the width less the
// prompt's and one column for the cursor after a row's last rune.
func (m Model) textWidth() int { return max(1, m.width-m.promptWidth()-1) }

// rows wraps the text at w columns, at spaces where it can.
func (m Model) rows(w int) []visualRow {
	var rows []visualRow
	for i, l := range m.lines {
		for _, r := range wrap(l, w) {
			rows = append(rows, visualRow{i, r[0], r[1]})
		}
	}
	return rows
}

// wrap cuts l into rows of at most w columns, after a space where one
// is in the row, and returns each row's [start, end).
func wrap(l []rune, w int) [][2]int {
	var out [][2]int
	start, cols, space := 0, 0, -1
	for i := 0; i < len(l); i++ {
		rw := runeWidth(l[i])
		if cols+rw > w && i > start {
			cut := i
			if space > start {
				cut = space
			}
			out = append(out, [2]int{start, cut})
			start, space = cut, -1
			cols = 0
			for _, r := range l[start:i] {
				cols += runeWidth(r)
			}
		}
		cols += rw
		if l[i] == ' ' {
			space = i + 1
		}
	}
	return append(out, [2]int{start, len(l)})
}

// cursorRow returns the index in rows of the row the cursor shows on.
func (m Model) cursorRow(rows []visualRow) int {
	for i, r := range rows {
		if r.line != m.row || m.col < r.start {
			continue
		}
		last := i+1 == len(rows) || rows[i+1].line != r.line
		if m.col < r.end || last {
			return i
		}
	}
	return 0
}

// View draws the editor: for a text of several lines, the rows (at most
// MaxHeight) around the cursor, each its prompt then its text, padded to
// the width.
func (m Model) View() string {
	if m.SingleLine {
		return m.singleView()
	}
	tw := m.textWidth()
	pad := m.width - m.promptWidth()
	var b strings.Builder
	if m.length() == 0 && m.Placeholder != "" {
		m.prompt(&b, 0)
		p := []rune(ansi.Truncate(m.Placeholder, tw, ""))
		b.WriteString(m.cursorView(p, 0, placeholderStyle()))
		b.WriteString(placeholderStyle().Render(string(p[min(1, len(p)):])))
		b.WriteString(strings.Repeat(" ", max(0, pad-ansi.StringWidth(string(p)))))
		return b.String()
	}
	rows := m.rows(tw)
	at := m.cursorRow(rows)
	h := max(1, min(len(rows), m.MaxHeight))
	top := max(0, at-h+1)
	for i := top; i < top+h; i++ {
		if i > top {
			b.WriteByte('\n')
		}
		r := rows[i]
		m.prompt(&b, i)
		text := m.lines[r.line][r.start:r.end]
		cols := runesWidth(text)
		if i == at {
			c := m.col - r.start
			b.WriteString(string(text[:c]))
			b.WriteString(m.cursorView(text, c, lipgloss.Style{}))
			if c < len(text) {
				b.WriteString(string(text[c+1:]))
			} else {
				cols++
			}
		} else {
			b.WriteString(string(text))
		}
		b.WriteString(strings.Repeat(" ", max(0, pad-cols)))
	}
	return b.String()
}

// singleView draws a single line: the part of it around the cursor that
// fits the width, or the placeholder.
func (m Model) singleView() string {
	line := m.lines[0]
	if len(line) == 0 && m.Placeholder != "" {
		p := []rune(ansi.Truncate(m.Placeholder, m.width, ""))
		return m.cursorView(p, 0, placeholderStyle()) + placeholderStyle().Render(string(p[min(1, len(p)):]))
	}
	// The first rune shown: as late as keeps the cursor in view.
	from, to, cols := m.col, m.col, 1
	if m.col < len(line) {
		to, cols = m.col+1, runeWidth(line[m.col])
	}
	for from > 0 && cols+runeWidth(line[from-1]) <= m.width {
		from--
		cols += runeWidth(line[from])
	}
	for to < len(line) && cols+runeWidth(line[to]) <= m.width {
		cols += runeWidth(line[to])
		to++
	}
	var b strings.Builder
	b.WriteString(string(line[from:m.col]))
	b.WriteString(m.cursorView(line, m.col, lipgloss.Style{}))
	if m.col < to {
		b.WriteString(string(line[m.col+1 : to]))
	}
	return b.String()
}

// prompt writes the prompt of visual row row.
func (m Model) prompt(b *strings.Builder, row int) {
	if m.Prompt != nil {
		b.WriteString(promptStyle().Render(m.Prompt(row)))
	}
}

// cursorView draws the cursor on text[i] (a space past the end), in
// style when it blinks off.
func (m Model) cursorView(text []rune, i int, style lipgloss.Style) string {
	ch := " "
	if i < len(text) {
		ch = string(text[i])
	}
	c := m.cur
	c.TextStyle = style
	c.SetChar(ch)
	return c.View()
}

// runeWidth returns the columns r takes.
func runeWidth(r rune) int {
	if r < 0x7f {
		return 1
	}
	return ansi.StringWidth(string(r))
}

// runesWidth returns the columns rs take.
func runesWidth(rs []rune) int {
	n := 0
	for _, r := range rs {
		n += runeWidth(r)
	}
	return n
}

// wordEnd returns where the word at or after i in l ends.
func wordEnd(l []rune, i int) int {
	for i < len(l) && unicode.IsSpace(l[i]) {
		i++
	}
	for i < len(l) && !unicode.IsSpace(l[i]) {
		i++
	}
	return i
}

// wordStart returns where the word before i in l starts.
func wordStart(l []rune, i int) int {
	for i > 0 && unicode.IsSpace(l[i-1]) {
		i--
	}
	for i > 0 && !unicode.IsSpace(l[i-1]) {
		i--
	}
	return i
}
