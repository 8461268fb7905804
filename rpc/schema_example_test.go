package rpc_test

import (
	"encoding/json"
	"fmt"

	"weft.dev/weft/rpc"
)

// HostDocument is the OpenRPC document a host serves as rpc.discover,
// made without a host (`weft schema` prints it): here, what it says of
// one method and one notification.
func ExampleHostDocument() {
	raw, err := rpc.HostDocument(rpc.Config{ServerInfo: rpc.Info{Name: "weft"}})
	if err != nil {
		panic(err)
	}
	var doc struct {
		Methods []struct {
			Name     string `json:"name"`
			Mutating bool   `json:"x-mutating"`
			Params   []struct {
				Name     string `json:"name"`
				Required bool   `json:"required"`
			} `json:"params"`
		} `json:"methods"`
		Notifications []struct {
			Name string `json:"name"`
		} `json:"x-notifications"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		panic(err)
	}
	for _, m := range doc.Methods {
		if m.Name == "run/cancel" {
			fmt.Println(m.Name, "mutating:", m.Mutating)
			for _, p := range m.Params {
				fmt.Println(" ", p.Name, "required:", p.Required)
			}
		}
	}
	fmt.Println(doc.Notifications[0].Name)
	// Output:
	// run/cancel mutating: true
	//   runId required: true
	//   reason required: false
	//   idempotencyKey required: false
	// events/closed
}
