package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"weft.dev/weft/internal/jsonstr"
)

// AppendJSONHead appends the start of e's JSON encoding, up to and
// including the "data" member's name:
//
//	{"seq":1,"sessionId":"…","runId":"…","type":"…","time":"…","data":
//
// The encoding of e is that head, [Event.JSONData] and "}". The head is
// byte for byte json.Marshal's for the same fields.
func (e Event) AppendJSONHead(dst []byte) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendInt(dst, e.Seq, 10)
	dst = append(dst, `,"sessionId":`...)
	dst = jsonstr.Append(dst, e.SessionID)
	if e.RunID != "" {
		dst = append(dst, `,"runId":`...)
		dst = jsonstr.Append(dst, e.RunID)
	}
	dst = append(dst, `,"type":`...)
	dst = jsonstr.Append(dst, string(e.Type))
	dst = append(dst, `,"time":"`...)
	dst = e.Time.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, `","data":`...)
}

// JSONData returns e.Data as it goes into e's JSON encoding: as it is
// when it holds no line break, compacted otherwise, and null when empty.
// Data must be valid JSON, as every store keeps it (store.ValidateBatch):
// unlike json.Marshal, JSONData neither validates nor re-escapes it, which
// for an event of hundreds of KiB is most of the cost of encoding it. The
// result is on one line, as SSE and newline-delimited JSON need, and
// aliases e.Data unless it had to be compacted.
func (e Event) JSONData() ([]byte, error) {
	if len(e.Data) == 0 {
		return []byte("null"), nil
	}
	if bytes.IndexByte(e.Data, '\n') < 0 && bytes.IndexByte(e.Data, '\r') < 0 {
		return e.Data, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, e.Data); err != nil {
		return nil, fmt.Errorf("encode session %s seq %d: data: %w", e.SessionID, e.Seq, err)
	}
	return b.Bytes(), nil
}

// AppendJSON appends e's JSON encoding to dst: [Event.AppendJSONHead],
// [Event.JSONData] and "}". It decodes to the same value as
// json.Marshal(e) and is byte for byte the same when Data is compact and
// escaped as json.Marshal leaves it.
func (e Event) AppendJSON(dst []byte) ([]byte, error) {
	data, err := e.JSONData()
	if err != nil {
		return dst, err
	}
	dst = e.AppendJSONHead(slices.Grow(dst, 128+len(e.SessionID)+len(e.RunID)+len(e.Type)+len(data)))
	dst = append(dst, data...)
	return append(dst, '}'), nil
}
