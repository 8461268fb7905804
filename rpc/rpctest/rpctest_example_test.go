package rpctest_test

import (
	"context"
	"fmt"
	"testing"

	"weft.dev/weft/rpc"
	"weft.dev/weft/rpc/rpctest"
)

type greetParams struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type greetResult struct {
	Greeting string `json:"greeting"`
}

// A server's tests check its rpc.discover document: every registered
// method with a description and schemas, and the events its clients are
// promised. In a test the first argument is the test's *testing.T; here
// a reporter prints what would fail it: the server never registered the
// event type "greeting.sent".
func ExampleCheckDiscovery() {
	s := rpc.NewServer(rpc.Config{ServerInfo: rpc.Info{Name: "greeter"}})
	rpc.Register(s, "greet", "Greet someone.", func(_ context.Context, p *greetParams) (*greetResult, error) {
		return &greetResult{Greeting: "hello, " + p.Name}, nil
	})

	t := reporter{}
	for _, m := range rpctest.Discover(t, s).Methods {
		if m.Name == "greet" {
			fmt.Printf("%s: %q, required params %v\n", m.Name, m.Description, m.ParamsSchema["required"])
		}
	}
	rpctest.CheckDiscovery(t, s, "greeting.sent")
	// Output:
	// greet: "Greet someone.", required params [name]
	// FAIL: rpc.discover: event "greeting.sent" missing
}

// reporter stands in for a *testing.T and prints what fails it. (It
// implements only what rpctest calls.)
type reporter struct{ testing.TB }

func (reporter) Helper()                        {}
func (reporter) Errorf(format string, a ...any) { fmt.Printf("FAIL: "+format+"\n", a...) }
func (reporter) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
