// Package sse splits a text/event-stream body into its events, for the
// model providers that read one (llm/openai, llm/anthropic).
//
// It frames events as the providers' official SDKs did (their
// ssestream.Decoder), so that dropping the SDKs changes nothing a stream
// does: lines end in LF or CRLF; "event:" sets the type and each "data:"
// line adds its value and an LF to the data; a blank line dispatches an
// event that has data (and forgets a type without any); comments and the
// other fields are ignored; an event begun but not ended by a blank line
// when the body ends is dropped, so a cut stream shows as one that lacks
// its terminal event.
package sse

import (
	"bufio"
	"bytes"
	"io"
)

// MaxLine bounds one line of the body, as the SDKs did: a longer line
// ends the stream with [bufio.ErrTooLong].
const MaxLine = bufio.MaxScanTokenSize << 9 // 32 MiB

// Event is one dispatched event.
type Event struct {
	// Type is the value of its "event:" field; empty if it had none.
	Type string
	// Data is the values of its "data:" lines, each followed by LF.
	Data []byte
}

// Decoder reads the events of one body. It is not safe for concurrent
// use; it does not close the body.
type Decoder struct {
	scn  *bufio.Scanner
	ev   Event
	data []byte
	err  error
}

// NewDecoder returns a Decoder reading r.
func NewDecoder(r io.Reader) *Decoder {
	scn := bufio.NewScanner(r)
	// 4 KiB to start, as bufio.Scanner: a stream's lines are short, and a
	// longer one grows the buffer (up to MaxLine).
	scn.Buffer(make([]byte, 0, 4<<10), MaxLine)
	return &Decoder{scn: scn}
}

// Next advances to the next event and reports whether there is one. At
// the end of the body, or on an error reading it, it returns false; Err
// tells which.
func (d *Decoder) Next() bool {
	if d.err != nil {
		return false
	}
	typ := ""
	d.data = d.data[:0]
	for d.scn.Scan() {
		line := d.scn.Bytes()
		if len(line) == 0 {
			if len(d.data) == 0 {
				typ = ""
				continue
			}
			d.ev = Event{Type: typ, Data: d.data}
			return true
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(name) {
		case "event":
			typ = string(value)
		case "data":
			d.data = append(d.data, value...)
			d.data = append(d.data, '\n')
		}
	}
	d.err = d.scn.Err()
	return false
}

// Event returns the current event. Its Data is valid until the next call
// of Next.
func (d *Decoder) Event() Event { return d.ev }

// Err returns the error that ended the body's reading, nil at its end.
func (d *Decoder) Err() error { return d.err }
