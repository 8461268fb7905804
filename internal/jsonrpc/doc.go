// Package jsonrpc is weft's JSON-RPC 2.0 wire codec: message envelopes,
// strict frame decoding, response encoding, and the framed byte streams
// (newline-delimited JSON and WebSocket) that the server in package
// weft.dev/weft/rpc and the client in package
// weft.dev/weft/internal/jsonrpc/client share.
//
// The package knows the JSON-RPC 2.0 grammar and nothing about weft's
// error table: decode failures come back as [*DecodeError] values that
// carry only the standard JSON-RPC code; package rpc turns them into
// wire errors with a kind.
//
// Every stream reads at most a configured number of bytes per frame; an
// oversized frame is reported as [ErrTooLarge] and the stream stays usable
// at the next frame boundary.
package jsonrpc
