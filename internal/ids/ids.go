// Package ids makes identifiers: a prefix, then 26 characters of Crockford
// base32 holding 48 bits of milliseconds and 80 random bits, so IDs sort by
// creation time and never collide in practice.
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// New returns a new ID such as "run_01jdx3…".
func New(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	rand.Read(b[6:])
	// 128 bits -> 26 base32 characters (130 bits, top 2 zero).
	out := make([]byte, 0, len(prefix)+1+26)
	out = append(out, prefix...)
	out = append(out, '_')
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	for i := 25; i >= 0; i-- {
		shift := uint(i * 5)
		var v uint64
		switch {
		case shift >= 64:
			v = hi >> (shift - 64)
		case shift > 59:
			v = lo>>shift | hi<<(64-shift)
		default:
			v = lo >> shift
		}
		out = append(out, alphabet[v&31])
	}
	return string(out)
}
