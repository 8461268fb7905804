package telemetry

import "encoding/binary"

// The protobuf wire format, as much of it as the exporter writes. It is
// written here, not with google.golang.org/protobuf/encoding/protowire,
// because linking that package initialises the protobuf runtime's
// internals (a hash of the executable, read at init) in every weft
// command, and the four encodings below are all the exporter needs.

// fieldNum is a protobuf field number.
type fieldNum int32

// wireType is a protobuf wire type.
type wireType int8

const (
	varintType  wireType = 0
	fixed64Type wireType = 1
	bytesType   wireType = 2
	fixed32Type wireType = 5
)

// appendTag appends the key of field num with wire type t.
func appendTag(b []byte, num fieldNum, t wireType) []byte {
	return binary.AppendUvarint(b, uint64(num)<<3|uint64(t))
}

// appendVarintValue appends v as a base-128 varint, which is what
// encoding/binary's Uvarint encoding is.
func appendVarintValue(b []byte, v uint64) []byte {
	return binary.AppendUvarint(b, v)
}

// appendLengthPrefixed appends v after its length as a varint.
func appendLengthPrefixed[T string | []byte](b []byte, v T) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}
