package rpc

import (
	"weft.dev/weft/api"
)

// encodeError marshals e; it cannot fail for Data of plain JSON values and
// falls back to an internal error otherwise.
func encodeError(e *api.Error) []byte {
	b, err := e.MarshalJSON()
	if err != nil {
		b, _ = api.NewError(api.KindInternal, "internal error").MarshalJSON()
	}
	return b
}
