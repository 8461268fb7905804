package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveStaleCgroups: the groups a weft process that is gone left
// (a Sessions' with a session's and a command's beneath, a lone
// command's) are removed by RemoveStale; this process's are kept.
func TestRemoveStaleCgroups(t *testing.T) {
	r := cgroups()
	own := r.own[ctrlPids]
	if own == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("no pids cgroup to make groups in: %v", r.errs[ctrlPids])
		}
		t.Skipf("no pids cgroup to make groups in: %v", r.errs[ctrlPids])
	}
	// This process's pid with another start time: its owner is gone.
	stale := []string{
		filepath.Join(own, fmt.Sprintf("weft-%d-%d", os.Getpid(), selfStart()+1), "s1", "weft-cmd-x"),
		filepath.Join(own, fmt.Sprintf("%s%d-%d-123", tempPrefix, os.Getpid(), selfStart()+1)),
	}
	live := filepath.Join(own, fmt.Sprintf("weft-%d-%d", os.Getpid(), selfStart()))
	for _, d := range append(stale, live) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { removeGroupTree(live) })
	if _, err := RemoveStale(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for _, d := range stale {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s: %v", d, err)
		}
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live process's group: %v", err)
	}
}
