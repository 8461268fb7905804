package openai

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// rawText is a JSON string decoded byte for byte. Unlike encoding/json,
// which replaces bytes that are not valid UTF-8 with U+FFFD, it keeps them,
// so that a multi-byte character a server split across two stream chunks
// comes out whole when the fragments are concatenated. JSON null decodes to
// an empty value.
type rawText []byte

// UnmarshalJSON implements [json.Unmarshaler].
func (t *rawText) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, " \t\r\n")
	if string(b) == "null" {
		*t = (*t)[:0]
		return nil
	}
	out, err := appendUnquoted((*t)[:0], b)
	if err != nil {
		return err
	}
	*t = out
	return nil
}

var errNotString = errors.New("not a JSON string")

// appendUnquoted appends the contents of the JSON string literal q (quotes
// included) to dst. Bytes that are not escapes are copied unchanged, whether
// or not they are valid UTF-8; \u escapes are encoded as UTF-8, a lone
// surrogate as U+FFFD.
func appendUnquoted(dst, q []byte) ([]byte, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return dst, fmt.Errorf("%w: %.40q", errNotString, q)
	}
	s := q[1 : len(q)-1]
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c < 0x20:
			return dst, fmt.Errorf("%w: unescaped byte %#x at %d", errNotString, c, i+1)
		case c != '\\':
			// Copy the run up to the next special byte in one go.
			j := i + 1
			for j < len(s) && s[j] != '\\' && s[j] != '"' && s[j] >= 0x20 {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(s) {
			return dst, fmt.Errorf("%w: truncated escape", errNotString)
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(s[i+2:])
			if !ok {
				return dst, fmt.Errorf("%w: bad \\u escape at %d", errNotString, i+1)
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := lowSurrogate(s[i:]); ok {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						dst = utf8.AppendRune(dst, d)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return dst, fmt.Errorf("%w: bad escape \\%c at %d", errNotString, e, i+1)
		}
		i += 2
	}
	return dst, nil
}

// lowSurrogate reads a `\uXXXX` escape at the start of s.
func lowSurrogate(s []byte) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	return hex4(s[2:])
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// runeJoiner turns a sequence of byte fragments into a sequence of strings
// that never end inside a multi-byte UTF-8 character: an incomplete
// character at the end of one fragment is held back and prepended to the
// next. Bytes that are invalid rather than incomplete pass through.
// The zero value is ready to use.
type runeJoiner struct {
	held []byte
}

// push returns the part of the held bytes plus p that ends on a character
// boundary, holding back an incomplete trailing character.
func (j *runeJoiner) push(p []byte) string {
	b := p
	if len(j.held) > 0 {
		b = append(j.held, p...)
		j.held = nil
	}
	cut := len(b)
	for k := len(b) - 1; k >= 0 && k >= len(b)-utf8.UTFMax+1; k-- {
		if utf8.RuneStart(b[k]) {
			if !utf8.FullRune(b[k:]) {
				cut = k
			}
			break
		}
	}
	if cut < len(b) {
		j.held = append([]byte(nil), b[cut:]...)
	}
	return string(b[:cut])
}

// flush returns what is held back, if anything, as it is.
func (j *runeJoiner) flush() string {
	s := string(j.held)
	j.held = nil
	return s
}

// argsText is a tool call's arguments: normally a JSON string holding JSON
// text, decoded like [rawText]. Some servers send the arguments object
// itself; then its JSON text is kept as it is.
type argsText []byte

// UnmarshalJSON implements [json.Unmarshaler].
func (t *argsText) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, " \t\r\n")
	if len(b) > 0 && (b[0] == '{' || b[0] == '[') {
		*t = append((*t)[:0], b...)
		return nil
	}
	return (*rawText)(t).UnmarshalJSON(b)
}
