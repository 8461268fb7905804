package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"weft.dev/weft/env/sandbox"
)

// Command runs a shell under a policy: confined by Landlock to the
// mounts (here one, writable) and the system directories, with a private
// TMPDIR, its whole process tree contained. The program's main must let
// the helper run first (see the package documentation); this test's
// TestMain does.
func ExampleCommand() {
	ctx := context.Background()
	work, err := os.MkdirTemp("", "sandbox-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(work)

	var cfg sandbox.Config // Landlock, network denied
	if abi, _ := sandbox.Probe(); abi == 0 {
		// Without Landlock, Command refuses unless the user chose to
		// run unsandboxed: contained, but not confined.
		cfg.Unsandboxed = true
	}
	p := sandbox.Policy{Config: cfg, Mounts: []sandbox.Mount{{Path: work, Write: true}}}

	c, err := sandbox.Command(ctx, p, "/bin/sh", "-c", `echo hello > greeting.txt && cat greeting.txt && case $TMPDIR in */weft-cmd-*) echo private TMPDIR;; esac`)
	if err != nil {
		panic(err)
	}
	c.Dir = work
	out, err := c.Output()
	fmt.Printf("%s%v\n", out, err)

	c, err = sandbox.Command(ctx, p, "/bin/sh", "-c", "exit 7")
	if err != nil {
		panic(err)
	}
	var exit *exec.ExitError
	if err := c.Run(); errors.As(err, &exit) {
		fmt.Println("exit status", exit.ExitCode())
	}
	// Output:
	// hello
	// private TMPDIR
	// <nil>
	// exit status 7
}
