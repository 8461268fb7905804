package agent

import (
	"encoding/binary"
	"errors"
	"fmt"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// transcriptMagic begins the binary form of a TranscriptBuilder (version
// 2: version 1 lacked the messages' seqs, which a rewind needs, and the
// trailer of basis and compactions; a snapshot of version 1 does not
// decode, and its owner reads the log).
const transcriptMagic = "WTX2"

// errCorrupt reports binary data that is not a transcript.
var errCorrupt = errors.New("agent: transcript snapshot is corrupt")

// MarshalBinary encodes the builder's whole state (its messages, and the
// open calls and results of the last assistant message), so that an owner
// can store a snapshot of a transcript and later resume folding events
// into it without reading the log before the snapshot. The format is
// versioned and compact: lengths as varints, strings as their bytes.
func (b *TranscriptBuilder) MarshalBinary() ([]byte, error) {
	out := make([]byte, 0, 64+b.Size())
	out = append(out, transcriptMagic...)
	out = binary.AppendUvarint(out, uint64(len(b.msgs)))
	for i, m := range b.msgs {
		out = appendMessage(out, m)
		out = binary.AppendUvarint(out, uint64(b.seqs[i]))
	}
	out = binary.AppendUvarint(out, uint64(b.openSeq))
	out = binary.AppendUvarint(out, uint64(len(b.open)))
	for _, c := range b.open {
		out = appendCall(out, c)
	}
	out = binary.AppendUvarint(out, uint64(len(b.results)))
	for _, r := range b.results {
		out = appendMessage(out, r)
		out = binary.AppendUvarint(out, uint64(b.resultSeqs[r.ToolCallID]))
	}
	out = binary.AppendUvarint(out, uint64(b.basis))
	out = binary.AppendUvarint(out, uint64(b.basisAt))
	out = binary.AppendUvarint(out, uint64(b.compactions))
	return out, nil
}

// UnmarshalBinary replaces the builder's state with the one data encodes
// (see MarshalBinary). Corrupt or truncated data is an error, never a
// panic, and leaves the builder unchanged.
func (b *TranscriptBuilder) UnmarshalBinary(data []byte) error {
	if len(data) < len(transcriptMagic) {
		return fmt.Errorf("%w: unknown format", errCorrupt)
	}
	if string(data[:len(transcriptMagic)]) != transcriptMagic {
		return fmt.Errorf("%w: unknown format", errCorrupt)
	}
	// One string holds every byte; the messages' strings are its slices,
	// so decoding allocates once for all of them.
	d := decoder{s: string(data[len(transcriptMagic):])}
	var nb TranscriptBuilder
	n := d.count()
	nb.msgs = make([]llm.Message, 0, n)
	nb.seqs = make([]int64, 0, n)
	for range n {
		m := d.message()
		nb.msgs = append(nb.msgs, m)
		nb.seqs = append(nb.seqs, int64(d.uvarint("seq")))
		nb.size += messageSize(m)
		nb.est += estimateBytes(m)
	}
	nb.openSeq = int64(d.uvarint("seq"))
	n = d.count()
	for range n {
		nb.open = append(nb.open, d.call())
	}
	n = d.count()
	if n > 0 {
		nb.results = make(map[string]llm.Message, n)
		nb.resultSeqs = make(map[string]int64, n)
	}
	for range n {
		r := d.message()
		nb.results[r.ToolCallID] = r
		nb.resultSeqs[r.ToolCallID] = int64(d.uvarint("seq"))
		nb.pending += messageSize(r)
		nb.estPending += estimateBytes(r)
	}
	nb.basis = int64(d.uvarint("basis"))
	nb.basisAt = int64(d.uvarint("basis offset"))
	nb.compactions = int(d.uvarint("compactions"))
	if d.err != nil {
		return d.err
	}
	if d.s != "" {
		return fmt.Errorf("%w: %d bytes after the end", errCorrupt, len(d.s))
	}
	*b = nb
	return nil
}

func appendString(out []byte, s string) []byte {
	out = binary.AppendUvarint(out, uint64(len(s)))
	return append(out, s...)
}

func appendCall(out []byte, c event.ToolCall) []byte {
	out = appendString(out, c.ID)
	out = appendString(out, c.Name)
	return appendString(out, c.Arguments)
}

func appendMessage(out []byte, m llm.Message) []byte {
	out = appendString(out, string(m.Role))
	var flags byte
	if m.IsError {
		flags |= 1
	}
	if len(m.Attachments) > 0 {
		flags |= 2 // attachments follow the tool calls
	}
	out = append(out, flags)
	out = appendString(out, m.Content)
	out = appendString(out, m.Reasoning)
	out = appendString(out, m.ToolCallID)
	out = appendString(out, m.ToolName)
	out = appendString(out, string(m.ProviderState))
	out = binary.AppendUvarint(out, uint64(len(m.ToolCalls)))
	for _, c := range m.ToolCalls {
		out = appendCall(out, c)
	}
	if len(m.Attachments) > 0 {
		out = binary.AppendUvarint(out, uint64(len(m.Attachments)))
		for _, a := range m.Attachments {
			out = appendString(out, a.MediaType)
			out = appendString(out, string(a.Data))
		}
	}
	return out
}

// decoder reads the binary form; after the first error every read
// returns zero values and err says what was wrong.
type decoder struct {
	s   string
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad %s", errCorrupt, what)
	}
	d.s = ""
}

func (d *decoder) uvarint(what string) uint64 {
	var v uint64
	var shift uint
	for i := 0; i < len(d.s) && i < binary.MaxVarintLen64; i++ {
		c := d.s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			d.s = d.s[i+1:]
			return v | uint64(c)<<shift
		}
		v |= uint64(c&0x7f) << shift
		shift += 7
	}
	d.fail(what)
	return 0
}

// count reads a number of items, each of which takes at least one byte,
// so a corrupt count cannot make the decoder allocate more than the data.
func (d *decoder) count() int {
	n := d.uvarint("count")
	if n > uint64(len(d.s)) {
		d.fail("count")
		return 0
	}
	return int(n)
}

func (d *decoder) str(what string) string {
	n := d.uvarint(what)
	if n > uint64(len(d.s)) {
		d.fail(what)
		return ""
	}
	v := d.s[:n]
	d.s = d.s[n:]
	return v
}

func (d *decoder) call() event.ToolCall {
	return event.ToolCall{ID: d.str("call id"), Name: d.str("call name"), Arguments: d.str("call arguments")}
}

func (d *decoder) message() llm.Message {
	m := llm.Message{Role: llm.Role(d.str("role"))}
	if d.s == "" {
		d.fail("flags")
		return m
	}
	flags := d.s[0]
	d.s = d.s[1:]
	m.IsError = flags&1 != 0
	m.Content = d.str("content")
	m.Reasoning = d.str("reasoning")
	m.ToolCallID = d.str("tool call id")
	m.ToolName = d.str("tool name")
	if ps := d.str("provider state"); ps != "" {
		m.ProviderState = []byte(ps)
	}
	if n := d.count(); n > 0 {
		m.ToolCalls = make([]event.ToolCall, 0, n)
		for range n {
			m.ToolCalls = append(m.ToolCalls, d.call())
		}
	}
	if flags&2 != 0 {
		// The encoder sets the flag only with attachments to write; a
		// count of 0 under it decodes as none, as the encoder would
		// write them, so that a snapshot reads back the same.
		if n := d.count(); n > 0 {
			m.Attachments = make([]llm.Attachment, 0, n)
			for range n {
				m.Attachments = append(m.Attachments, llm.Attachment{MediaType: d.str("media type"), Data: []byte(d.str("attachment"))})
			}
		}
	}
	return m
}
