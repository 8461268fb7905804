package anthropic

import (
	"encoding/base64"
	"fmt"
	"strings"

	"weft.dev/weft/llm"
)

// imageBlock is an attachment as the Messages API's image block with a
// base64 source (the tests check the request body it makes).
func imageBlock(a llm.Attachment) (contentBlock, error) {
	if !strings.HasPrefix(a.MediaType, "image/") {
		return contentBlock{}, fmt.Errorf("attachment of type %q: only images are sent", a.MediaType)
	}
	return contentBlock{Type: "image", Source: &imageSource{
		Data:      base64.StdEncoding.EncodeToString(a.Data),
		MediaType: a.MediaType,
		Type:      "base64",
	}}, nil
}
