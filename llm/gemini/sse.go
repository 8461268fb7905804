package gemini

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxEvent bounds the data of one server-sent event.
const maxEvent = 8 << 20

// errPartialEvent reports a body that ended inside an event: data lines
// without the blank line that dispatches them.
var errPartialEvent = errors.New("the body ended inside an event")

// errEventTooLarge reports an event larger than maxEvent.
var errEventTooLarge = fmt.Errorf("an event is larger than %d bytes", maxEvent)

// events splits a text/event-stream body into the data of its events, as
// the EventSource specification does: lines end in LF or CRLF, data lines
// join with LF, a blank line dispatches, comments and other fields are
// ignored. An event is dispatched only by its blank line, so a body cut
// after an event's data line is not taken for a complete event.
type events struct {
	r    *bufio.Reader
	line []byte
	data []byte
}

func newEvents(r io.Reader) *events {
	return &events{r: bufio.NewReaderSize(r, 32<<10)}
}

// next returns the data of the next event, valid until the following call.
// At the end of the body it returns io.EOF, or errPartialEvent if an event
// was begun; other errors are the body's.
func (e *events) next() ([]byte, error) {
	e.data = e.data[:0]
	begun := false
	for {
		line, err := e.readLine()
		if err != nil {
			if err == io.EOF && (begun || len(line) > 0) {
				return nil, errPartialEvent
			}
			return nil, err
		}
		if len(line) == 0 {
			if begun {
				return e.data, nil
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			// A comment (": keep-alive"), or event, id, retry.
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if begun {
			e.data = append(e.data, '\n')
		}
		if len(e.data)+len(value) > maxEvent {
			return nil, errEventTooLarge
		}
		e.data = append(e.data, value...)
		begun = true
	}
}

// readLine returns the next line without its terminator. At the end of the
// body it returns what it read with io.EOF.
func (e *events) readLine() ([]byte, error) {
	e.line = e.line[:0]
	for {
		chunk, err := e.r.ReadSlice('\n')
		if len(e.line)+len(chunk) > maxEvent+64 {
			return nil, errEventTooLarge
		}
		e.line = append(e.line, chunk...)
		switch err {
		case nil:
			line := e.line[:len(e.line)-1]
			return bytes.TrimSuffix(line, []byte("\r")), nil
		case bufio.ErrBufferFull:
			continue
		default:
			return e.line, err
		}
	}
}
