package sse

import (
	"bufio"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDecoder(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		want []string // type=data
	}{
		"lf":             {"event: a\ndata: 1\n\ndata: 2\n\n", []string{"a=1\n", "=2\n"}},
		"crlf":           {"event: a\r\ndata: 1\r\n\r\n", []string{"a=1\n"}},
		"multi-line":     {"data: a\ndata:b\n\n", []string{"=a\nb\n"}},
		"fields":         {": hi\nid: 7\nretry: 5\ndata: a\n\n", []string{"=a\n"}},
		"type forgotten": {"event: ping\n\ndata: a\n\n", []string{"=a\n"}},
		"empty data":     {"data:\n\n", []string{"=\n"}},
		"unterminated":   {"data: a\n\ndata: b\n", []string{"=a\n"}},
		"no line ending": {"data: a\n\ndata: b", []string{"=a\n"}},
		"empty":          {"", nil},
	} {
		t.Run(name, func(t *testing.T) {
			d := NewDecoder(iotest.OneByteReader(strings.NewReader(tc.body)))
			var got []string
			for d.Next() {
				got = append(got, d.Event().Type+"="+string(d.Event().Data))
			}
			if d.Err() != nil {
				t.Fatal(d.Err())
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Errorf("events = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLineTooLong(t *testing.T) {
	d := NewDecoder(strings.NewReader("data: " + strings.Repeat("x", MaxLine) + "\n\n"))
	if d.Next() || !errors.Is(d.Err(), bufio.ErrTooLong) {
		t.Fatalf("err = %v", d.Err())
	}
}

func TestReadError(t *testing.T) {
	boom := errors.New("boom")
	d := NewDecoder(iotest.ErrReader(boom))
	if d.Next() || !errors.Is(d.Err(), boom) {
		t.Fatalf("err = %v", d.Err())
	}
}
