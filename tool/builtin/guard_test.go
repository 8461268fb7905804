package builtin_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/env"
	"weft.dev/weft/tool/builtin"
)

// noSrcUtil is a guard that refuses what lies in src/util, wherever the
// path that reached it was.
type noSrcUtil struct{}

func (noSrcUtil) Allow(t env.Target) error {
	for _, p := range append([]*env.Path{t.Path}, t.Real...) {
		if strings.Contains(p.Rel()+"/", "src/util/") {
			return errors.New("not src/util")
		}
	}
	return nil
}

// The file tools under a guarded binding: a read or write through a link
// into a refused directory is an error naming the rule's reason; list_dir,
// glob and grep leave refused entries out and say how many.
func TestFileToolsUnderAGuard(t *testing.T) {
	f := newFixture(t, builtin.Options{})
	if err := os.Symlink("src/util", filepath.Join(f.work, "u")); err != nil {
		t.Fatal(err)
	}
	f.b = f.b.WithGuard(noSrcUtil{})
	check(t, f.call("read_file", m{"path": "u/util.go"}), true, "denied by policy", "not src/util")
	check(t, f.call("write_file", m{"path": "u/new.go", "content": "x"}), true, "denied by policy")
	if _, err := os.Stat(filepath.Join(f.work, "src/util/new.go")); err == nil {
		t.Error("the refused write created the file")
	}
	check(t, f.call("list_dir", m{"path": "u"}), true, "denied by policy")
	check(t, f.call("list_dir", m{"path": "src"}), false, "main.go", "[1 entry left out: denied by policy]")
	res := f.call("grep", m{"pattern": "Hi|main"})
	check(t, res, false, "src/main.go", "entries left out: denied by policy")
	if strings.Contains(res.Output, "util.go") {
		t.Errorf("grep shows a refused file: %s", res.Output)
	}
	res = f.call("glob", m{"pattern": "**/*.go"})
	check(t, res, false, "src/main.go", "left out: denied by policy")
	if strings.Contains(res.Output, "util") {
		t.Errorf("glob shows a refused file: %s", res.Output)
	}
	check(t, f.call("grep", m{"pattern": "Hi", "path": "u/util.go"}), true, "denied by policy")
	check(t, f.call("read_file", m{"path": "a.txt"}), false, "one")
}
