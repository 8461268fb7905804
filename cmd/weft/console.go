package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// console is a terminal in raw mode: keys arrive as they are typed (no
// echo, no line discipline, Ctrl-C and Ctrl-D as keys rather than
// signals), while output keeps its newline translation. It is owned by
// one goroutine, but for the reader it starts, which blocks on the
// terminal until the process exits.
type console struct {
	fd    int
	saved *unix.Termios
	keys  chan []byte // what the terminal sent, as read
	dec   keyDecoder
	// queued are keys decoded but not used yet (typed ahead).
	queued []key
	once   sync.Once
}

// openConsole puts the terminal in raw mode and starts reading it.
// Restore puts the mode back; call it before the process exits.
func openConsole(in *os.File) (*console, error) {
	fd := int(in.Fd())
	saved, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("not a terminal: %w", err)
	}
	raw := *saved
	raw.Iflag &^= unix.ICRNL | unix.INLCR | unix.IGNCR | unix.IXON | unix.ISTRIP
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, fmt.Errorf("terminal raw mode: %w", err)
	}
	c := &console{fd: fd, saved: saved, keys: make(chan []byte, 64)}
	go c.read(in)
	return c, nil
}

// read hands what the terminal sends to c.keys until it ends. It is the
// one goroutine that reads the terminal; it ends with the process (a read
// from a terminal cannot be cancelled).
func (c *console) read(in io.Reader) {
	for {
		b := make([]byte, 256)
		n, err := in.Read(b)
		if n > 0 {
			c.keys <- b[:n]
		}
		if err != nil {
			close(c.keys)
			return
		}
	}
}

// Restore puts the terminal back in the mode it was in. It may be called
// more than once.
func (c *console) Restore() {
	c.once.Do(func() { unix.IoctlSetTermios(c.fd, unix.TCSETS, c.saved) })
}

// keyCode names the keys the line editor knows; a printable character is
// keyRune.
type keyCode int

const (
	keyRune keyCode = iota
	keyEnter
	keyBackspace
	keyDelete
	keyLeft
	keyRight
	keyUp
	keyDown
	keyHome
	keyEnd
	keyKillLine  // Ctrl-U
	keyKillToEnd // Ctrl-K
	keyKillWord  // Ctrl-W
	keyInterrupt // Ctrl-C
	keyEOF       // Ctrl-D
	keyRedraw    // Ctrl-L
	keyUnknown
)

// key is one key press.
type key struct {
	code keyCode
	r    rune
}

// keyDecoder turns the bytes a terminal sends into keys, keeping an
// incomplete escape sequence or UTF-8 character for the next read.
type keyDecoder struct{ pending []byte }

// decode returns the keys in b (after what was pending).
func (d *keyDecoder) decode(b []byte) []key {
	buf := append(d.pending, b...)
	d.pending = nil
	var out []key
	for len(buf) > 0 {
		k, n := decodeKey(buf)
		if n == 0 { // incomplete
			d.pending = append([]byte(nil), buf...)
			break
		}
		out = append(out, k)
		buf = buf[n:]
	}
	return out
}

// decodeKey decodes the first key of b and its length; 0 when b holds
// only its beginning.
func decodeKey(b []byte) (key, int) {
	switch c := b[0]; {
	case c == '\r' || c == '\n':
		return key{code: keyEnter}, 1
	case c == 0x7f || c == 0x08:
		return key{code: keyBackspace}, 1
	case c == 0x01:
		return key{code: keyHome}, 1
	case c == 0x05:
		return key{code: keyEnd}, 1
	case c == 0x02:
		return key{code: keyLeft}, 1
	case c == 0x06:
		return key{code: keyRight}, 1
	case c == 0x10:
		return key{code: keyUp}, 1
	case c == 0x0e:
		return key{code: keyDown}, 1
	case c == 0x03:
		return key{code: keyInterrupt}, 1
	case c == 0x04:
		return key{code: keyEOF}, 1
	case c == 0x15:
		return key{code: keyKillLine}, 1
	case c == 0x0b:
		return key{code: keyKillToEnd}, 1
	case c == 0x17:
		return key{code: keyKillWord}, 1
	case c == 0x0c:
		return key{code: keyRedraw}, 1
	case c == 0x1b:
		return decodeEscape(b)
	case c < 0x20:
		return key{code: keyUnknown}, 1
	}
	if !utf8.FullRune(b) {
		return key{}, 0
	}
	r, n := utf8.DecodeRune(b)
	return key{code: keyRune, r: r}, n
}

// decodeEscape decodes an escape sequence: CSI (ESC [ …) or SS3 (ESC O x).
// A lone ESC is a key of its own (ignored by the editor).
func decodeEscape(b []byte) (key, int) {
	if len(b) == 1 {
		return key{code: keyUnknown}, 1
	}
	switch b[1] {
	case 'O':
		if len(b) < 3 {
			return key{}, 0
		}
		return key{code: finalKey(b[2], "")}, 3
	case '[':
		for i := 2; i < len(b); i++ {
			if b[i] >= 0x40 && b[i] <= 0x7e {
				return key{code: finalKey(b[i], string(b[2:i]))}, i + 1
			}
		}
		return key{}, 0
	}
	return key{code: keyUnknown}, 1
}

// finalKey names the key of a CSI or SS3 sequence by its final byte and
// parameters.
func finalKey(final byte, params string) keyCode {
	switch final {
	case 'A':
		return keyUp
	case 'B':
		return keyDown
	case 'C':
		return keyRight
	case 'D':
		return keyLeft
	case 'H':
		return keyHome
	case 'F':
		return keyEnd
	case '~':
		switch params {
		case "1", "7":
			return keyHome
		case "4", "8":
			return keyEnd
		case "3":
			return keyDelete
		}
	}
	return keyUnknown
}

// lineEditor edits one line in a raw terminal: moving the cursor,
// deleting, and browsing a history with the arrows. It draws on out.
type lineEditor struct {
	out     io.Writer
	prompt  string
	buf     []rune
	pos     int
	history []string
	hpos    int    // the history entry shown; len(history) for the new line
	draft   []rune // the new line, kept while browsing
	shown   bool
}

// start begins a new line after prompt and draws it.
func (e *lineEditor) start(prompt string) {
	e.prompt, e.buf, e.pos, e.hpos, e.draft = prompt, nil, 0, len(e.history), nil
	e.render()
}

// remember adds line to the history (not twice in a row, not blank).
func (e *lineEditor) remember(line string) {
	if strings.TrimSpace(line) == "" || len(e.history) > 0 && e.history[len(e.history)-1] == line {
		return
	}
	e.history = append(e.history, line)
}

// key applies k; it reports the line when k ends it (Enter). Ctrl-C and
// Ctrl-D are the caller's.
func (e *lineEditor) key(k key) (string, bool) {
	switch k.code {
	case keyRune:
		e.buf = append(e.buf[:e.pos], append([]rune{k.r}, e.buf[e.pos:]...)...)
		e.pos++
	case keyEnter:
		line := string(e.buf)
		e.pos = len(e.buf)
		e.render()
		fmt.Fprint(e.out, "\r\n")
		e.shown = false
		return line, true
	case keyBackspace:
		if e.pos > 0 {
			e.buf = append(e.buf[:e.pos-1], e.buf[e.pos:]...)
			e.pos--
		}
	case keyDelete:
		if e.pos < len(e.buf) {
			e.buf = append(e.buf[:e.pos], e.buf[e.pos+1:]...)
		}
	case keyLeft:
		e.pos = max(e.pos-1, 0)
	case keyRight:
		e.pos = min(e.pos+1, len(e.buf))
	case keyHome:
		e.pos = 0
	case keyEnd:
		e.pos = len(e.buf)
	case keyKillLine:
		e.buf, e.pos = append([]rune(nil), e.buf[e.pos:]...), 0
	case keyKillToEnd:
		e.buf = e.buf[:e.pos]
	case keyKillWord:
		i := e.pos
		for i > 0 && e.buf[i-1] == ' ' {
			i--
		}
		for i > 0 && e.buf[i-1] != ' ' {
			i--
		}
		e.buf, e.pos = append(e.buf[:i], e.buf[e.pos:]...), i
	case keyUp, keyDown:
		e.browse(k.code == keyUp)
	}
	e.render()
	return "", false
}

// browse moves through the history.
func (e *lineEditor) browse(back bool) {
	next := e.hpos + 1
	if back {
		next = e.hpos - 1
	}
	if next < 0 || next > len(e.history) {
		return
	}
	if e.hpos == len(e.history) {
		e.draft = append([]rune(nil), e.buf...)
	}
	e.hpos = next
	if next == len(e.history) {
		e.buf = e.draft
	} else {
		e.buf = []rune(e.history[next])
	}
	e.pos = len(e.buf)
}

// render draws the prompt and the line, with the cursor in place.
func (e *lineEditor) render() {
	var b strings.Builder
	b.WriteString("\r\033[2K")
	b.WriteString(e.prompt)
	b.WriteString(string(e.buf))
	if n := len(e.buf) - e.pos; n > 0 {
		fmt.Fprintf(&b, "\033[%dD", n)
	}
	io.WriteString(e.out, b.String())
	e.shown = true
}

// hide clears the line so that other output can be printed; render
// draws it again.
func (e *lineEditor) hide() {
	if e.shown {
		io.WriteString(e.out, "\r\033[2K")
		e.shown = false
	}
}

// abandon ends the line without a result, leaving what was typed on
// screen.
func (e *lineEditor) abandon(mark string) {
	if e.shown {
		fmt.Fprintf(e.out, "%s\r\n", mark)
		e.shown = false
	}
	e.buf, e.pos = nil, 0
}
