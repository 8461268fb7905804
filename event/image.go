package event

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"slices"
)

// Bounds of the images a log carries inline (see [Part]). An image is
// stored in the event that brings it (message.user, steer.accepted,
// tool.call.completed), base64 in its JSON: MaxImageBytes of image are
// about 4 MiB of event, and MaxImagesBytes of one input or one tool
// result about 6.7 MiB, which with a text input's 1 MiB stays within a
// JSON-RPC frame (8 MiB), so that every event can still be read and
// streamed whole.
const (
	// MaxImageBytes caps one image's bytes (as decoded from base64).
	MaxImageBytes = 3 << 20
	// MaxImagesBytes caps the bytes of all the images of one input, one
	// steer or one tool result.
	MaxImagesBytes = 5 << 20
	// MaxImages caps the number of images of one input or tool result.
	MaxImages = 16
)

// ImageMediaTypes returns the media types of the images weft accepts
// (image/png, image/jpeg, image/gif, image/webp): those every provider
// weft speaks to accepts.
func ImageMediaTypes() []string {
	return []string{"image/png", "image/jpeg", "image/gif", "image/webp"}
}

// Errors of [CheckImage], each wrapped with the details.
var (
	// ErrImageType reports a media type weft does not accept.
	ErrImageType = errors.New("unsupported image type")
	// ErrImageTooLarge reports an image over MaxImageBytes, or images
	// over MaxImagesBytes or MaxImages together.
	ErrImageTooLarge = errors.New("image too large")
	// ErrImageUndecodable reports bytes that are not an image of the
	// declared media type.
	ErrImageUndecodable = errors.New("image does not decode")
)

// ImagePart returns an image part of mediaType holding data, after
// [CheckImage].
func ImagePart(mediaType string, data []byte) (Part, error) {
	p := Part{Type: PartImage, MediaType: mediaType, Data: data}
	return p, CheckImage(p)
}

// CheckImage checks an image part: a media type of [ImageMediaTypes],
// at most MaxImageBytes, and bytes whose header decodes as that type (the
// image's dimensions are read, not its pixels). The error wraps
// ErrImageType, ErrImageTooLarge or ErrImageUndecodable.
func CheckImage(p Part) error {
	if !slices.Contains(ImageMediaTypes(), p.MediaType) {
		return fmt.Errorf("%w %q: want one of %v", ErrImageType, p.MediaType, ImageMediaTypes())
	}
	if len(p.Data) > MaxImageBytes {
		return fmt.Errorf("%w: %d bytes; the limit is %d", ErrImageTooLarge, len(p.Data), MaxImageBytes)
	}
	var err error
	switch p.MediaType {
	case "image/png":
		_, err = png.DecodeConfig(bytes.NewReader(p.Data))
	case "image/jpeg":
		_, err = jpeg.DecodeConfig(bytes.NewReader(p.Data))
	case "image/gif":
		_, err = gif.DecodeConfig(bytes.NewReader(p.Data))
	case "image/webp":
		err = checkWebP(p.Data)
	}
	if err != nil {
		return fmt.Errorf("%w as %s: %v", ErrImageUndecodable, p.MediaType, err)
	}
	return nil
}

// CheckImages checks the image parts of parts with [CheckImage], and
// that together they are at most MaxImages and MaxImagesBytes. It
// returns the index in parts of the part at fault with the error, or -1
// for a limit of them all.
func CheckImages(parts []Part) (int, error) {
	n, total := 0, 0
	for i, p := range parts {
		if p.Type != PartImage {
			continue
		}
		if err := CheckImage(p); err != nil {
			return i, err
		}
		n++
		total += len(p.Data)
	}
	if n > MaxImages {
		return -1, fmt.Errorf("%w: %d images; the limit is %d", ErrImageTooLarge, n, MaxImages)
	}
	if total > MaxImagesBytes {
		return -1, fmt.Errorf("%w: %d bytes of images; the limit is %d", ErrImageTooLarge, total, MaxImagesBytes)
	}
	return -1, nil
}

// checkWebP checks a WebP file's RIFF header and its first chunk (the
// standard library has no WebP decoder): "RIFF", a size, "WEBP", and a
// VP8, VP8L or VP8X chunk.
func checkWebP(b []byte) error {
	if len(b) < 16 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return image.ErrFormat
	}
	switch string(b[12:16]) {
	case "VP8 ", "VP8L", "VP8X":
		return nil
	}
	return image.ErrFormat
}
