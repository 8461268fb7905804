package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"weft.dev/weft/rpc"
)

// schemaCmd prints the protocol as an OpenRPC document: what a `weft
// serve` of this version answers to rpc.discover, without a host or a
// store, so that a client in another language can be typed from it at
// build time.
type schemaCmd struct {
	Compact bool `help:"Print the document on one line."`
}

func (c *schemaCmd) Run(a *app) error {
	doc, err := rpc.HostDocument(rpc.Config{ServerInfo: serverInfo()})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if c.Compact {
		out.Write(doc)
	} else if err := json.Indent(&out, doc, "", "  "); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	out.WriteByte('\n')
	_, err = a.stdout.Write(out.Bytes())
	return err
}
