package api_test

import (
	"errors"
	"fmt"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// The method table describes every method of the protocol: rpc serves
// it, the Go client calls it and the OpenRPC document is generated from
// it, so code that needs the methods walks it instead of listing them.
func ExampleMethods() {
	for _, d := range api.Methods() {
		if info := d.Info(); info.Mutating && info.Params == api.RunStart.Info().Params {
			fmt.Println(info.Name, "takes", info.Params, "and answers", info.Result)
		}
	}
	for _, d := range api.Methods() {
		if info := d.Info(); info.Stream() {
			fmt.Println(info.Name, "streams", info.Item, "in", info.Notifications)
		}
	}
	// Output:
	// run/start takes api.StartRunParams and answers api.RunResult
	// events/subscribe streams event.Event in [events/event events/closed]
	// process/follow streams api.Chunk in [process/output process/closed]
}

// Params check what they can on their own, before any host sees them: an
// error names the field at fault.
func ExampleStartRunParams_Validate() {
	p := api.StartRunParams{SessionID: "ses_1", Input: api.Input(event.TextParts("hi")), Busy: "later"}
	var e *api.Error
	if errors.As(p.Validate(), &e) {
		fmt.Println(e.Kind, e.Data["field"])
	}
	// Output:
	// invalid_params busy
}
