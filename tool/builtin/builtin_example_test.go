package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// The built-in tools go into a registry; every call reaches files only
// through the session's mounts (the call's env.Binding), and names them
// by their display path, /environment/<mount>/… .
func Example() {
	dir, err := os.MkdirTemp("", "builtin-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	b, err := env.NewBinding(1, []event.Mount{{ID: "work", Path: dir, Mode: event.ModeReadWrite, Kind: event.KindLocal}})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	r := tool.NewRegistry()
	// The shell runs in the sandbox; this kernel may lack Landlock.
	sb := &sandbox.Config{}
	if abi, _ := sandbox.Probe(); abi == 0 {
		sb.Unsandboxed = true
	}
	if err := builtin.Register(r, builtin.Options{Sandbox: sb}); err != nil {
		panic(err)
	}
	var names []string
	for _, s := range r.Specs() {
		names = append(names, s.Name)
	}
	fmt.Println(strings.Join(names, " "))

	ctx := context.Background()
	call := func(name, args string) {
		res := r.Call(ctx, name, &tool.Call{ID: "call_1", Arguments: json.RawMessage(args), Env: b}, tool.CallOptions{})
		fmt.Printf("%s (error %v):\n%s\n", name, res.IsError, strings.TrimRight(res.Output, "\n"))
	}
	call("write_file", `{"path": "notes/hello.txt", "content": "hello\nworld\n"}`)
	call("read_file", `{"path": "/environment/work/notes/hello.txt"}`)
	call("grep", `{"pattern": "wor"}`)
	call("read_file", `{"path": "../../etc/passwd"}`)
	call("shell", `{"command": "wc -l < notes/hello.txt"}`)
	// Output:
	// edit_file glob grep list_dir read_file shell write_file
	// write_file (error false):
	// created /environment/work/notes/hello.txt (12 bytes)
	// read_file (error false):
	//      1	hello
	//      2	world
	// grep (error false):
	// /environment/work/notes/hello.txt:2:world
	// read_file (error true):
	// ../../etc/passwd: outside mount "work": ".." escapes the mount root
	// shell (error false):
	// 2
	// [exit code 0]
}
