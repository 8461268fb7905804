package gemini

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestEvents(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		want []string
		end  error
	}{
		"lf":             {"data: a\n\ndata: b\n\n", []string{"a", "b"}, io.EOF},
		"crlf":           {"data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}, io.EOF},
		"multi-line":     {"data: a\ndata:b\n\n", []string{"a\nb"}, io.EOF},
		"fields":         {": hi\nevent: x\nid: 7\nretry: 5\ndata: a\n\n", []string{"a"}, io.EOF},
		"no space":       {"data:a\n\n", []string{"a"}, io.EOF},
		"blank lines":    {"\n\n\ndata: a\n\n\n\n", []string{"a"}, io.EOF},
		"empty data":     {"data:\n\ndata: b\n\n", []string{"", "b"}, io.EOF},
		"unterminated":   {"data: a\n\ndata: b\n", []string{"a"}, errPartialEvent},
		"no line ending": {"data: a\n\ndata: b", []string{"a"}, errPartialEvent},
		"comment at end": {"data: a\n\n: x", []string{"a"}, errPartialEvent},
		"empty":          {"", nil, io.EOF},
	} {
		t.Run(name, func(t *testing.T) {
			ev := newEvents(iotest.OneByteReader(strings.NewReader(tc.body)))
			var got []string
			for {
				data, err := ev.next()
				if err != nil {
					if err != tc.end {
						t.Errorf("end = %v, want %v", err, tc.end)
					}
					break
				}
				got = append(got, string(data))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Errorf("events = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEventTooLarge(t *testing.T) {
	big := "data: " + strings.Repeat("x", maxEvent+1) + "\n\n"
	if _, err := newEvents(strings.NewReader(big)).next(); !errors.Is(err, errEventTooLarge) {
		t.Fatalf("err = %v", err)
	}
	split := strings.Repeat("data: "+strings.Repeat("x", 1<<20)+"\n", 9) + "\n"
	if _, err := newEvents(strings.NewReader(split)).next(); !errors.Is(err, errEventTooLarge) {
		t.Fatalf("err = %v", err)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"37s": 37 * time.Second, "0.5s": 500 * time.Millisecond, "1.000340s": 1000340 * time.Microsecond,
		"": 0, "5": 0, "-1s": 0, "xs": 0,
	} {
		got, _ := parseDuration(in)
		if got != want {
			t.Errorf("parseDuration(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestSyntheticID(t *testing.T) {
	for id, want := range map[string]bool{
		syntheticID(0, 0): true, syntheticID(12, 3): true,
		"call_abc": false, "call_1": false, "call_1_": false, "call__1": false, "call_1_2_3": false,
		"rgjcr7hc": false, "toolu_01": false, "call_1_x": false, "": false,
	} {
		if got := isSyntheticID(id); got != want {
			t.Errorf("isSyntheticID(%q) = %v", id, got)
		}
	}
}
