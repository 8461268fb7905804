package telemetry

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestWireMatchesProtowire holds the exporter's own wire encoding to
// protobuf's for random field numbers and values, including the varint
// lengths' boundaries.
func TestWireMatchesProtowire(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 26))
	vals := []uint64{0, 1, 127, 128, 16383, 16384, 1<<63 - 1, 1 << 63, ^uint64(0)}
	for range 1000 {
		vals = append(vals, r.Uint64()>>r.IntN(64))
	}
	for i, v := range vals {
		num := fieldNum(1 + r.IntN(1<<29-1))
		if i%3 == 0 {
			num = fieldNum(1 + r.IntN(20))
		}
		pn := protowire.Number(num)
		s := string(bytes.Repeat([]byte{'x'}, int(v%300)))
		cases := []struct {
			name      string
			got, want []byte
		}{
			{"varint", appendVarintValue(appendTag(nil, num, varintType), v), protowire.AppendVarint(protowire.AppendTag(nil, pn, protowire.VarintType), v)},
			{"fixed64", appendFixed64(nil, num, v), protowire.AppendFixed64(protowire.AppendTag(nil, pn, protowire.Fixed64Type), v)},
			{"fixed32", appendFixed32(nil, num, uint32(v)), protowire.AppendFixed32(protowire.AppendTag(nil, pn, protowire.Fixed32Type), uint32(v))},
			{"string", appendLengthPrefixed(appendTag(nil, num, bytesType), s), protowire.AppendString(protowire.AppendTag(nil, pn, protowire.BytesType), s)},
			{"bytes", appendMessage(nil, num, []byte(s)), protowire.AppendBytes(protowire.AppendTag(nil, pn, protowire.BytesType), []byte(s))},
		}
		for _, c := range cases {
			if c.name == "fixed64" && v == 0 || c.name == "fixed32" && uint32(v) == 0 {
				continue // proto3 zero values are left out by design
			}
			if !bytes.Equal(c.got, c.want) {
				t.Fatalf("%s field %d value %d: got %x, protowire %x", c.name, num, v, c.got, c.want)
			}
		}
	}
}
