package mcp

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"weft.dev/weft/env/sandbox"
)

func TestMain(m *testing.M) {
	// Sandboxed servers re-execute the test binary as the helper.
	if sandbox.IsHelper(os.Args) {
		sandbox.Main(os.Args)
	}
	// The test binary is also the fake server the tests start.
	if mode := os.Getenv(fakeEnv); mode != "" {
		os.Exit(fakeServer(mode))
	}
	goleak.VerifyTestMain(m)
}
