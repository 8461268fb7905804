package anthropic

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"weft.dev/weft/llm"
)

// imageBlock is an attachment as the Messages API's image block with a
// base64 source; it is one wire shape, so that an encoder without the SDK
// can carry it over (the tests check the request body it makes).
func imageBlock(a llm.Attachment) (*anthropic.ImageBlockParam, error) {
	if !strings.HasPrefix(a.MediaType, "image/") {
		return nil, fmt.Errorf("attachment of type %q: only images are sent", a.MediaType)
	}
	return &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
		Data:      base64.StdEncoding.EncodeToString(a.Data),
		MediaType: anthropic.Base64ImageSourceMediaType(a.MediaType),
	}}}, nil
}
