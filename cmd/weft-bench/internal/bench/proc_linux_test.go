package bench

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestTreeCPUAndMem reads this process's CPU time and memory from /proc
// (Linux only: proc_other.go reports errNoProc elsewhere).
func TestTreeCPUAndMem(t *testing.T) {
	if _, err := treeCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	m, err := readMem(0)
	if err != nil || m.RSS <= 0 {
		t.Fatalf("readMem: %+v %v", m, err)
	}
}

// TestRunMeasuredPeak checks that a small child's peak memory is its own,
// not this process's: with 256 MB touched here, a shell that sleeps must
// not look as large (its ru_maxrss does), and the sleep it starts is
// counted in its tree.
func TestRunMeasuredPeak(t *testing.T) {
	big := make([]byte, 256<<20)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	c := exec.CommandContext(t.Context(), "/bin/sh", "-c", "sleep 0.2; true")
	wall, _, peak, err := runMeasured(c)
	if err != nil {
		t.Fatal(err)
	}
	if wall < 200*time.Millisecond || peak <= 0 || peak > 64<<20 {
		t.Errorf("wall %s, peak %d bytes; ru_maxrss %d kB", wall, peak, c.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
	}
	runtime.KeepAlive(big)

	sh := exec.CommandContext(t.Context(), "/bin/sh", "-c", "sleep 1; true")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer sh.Wait()
	defer sh.Process.Kill()
	for range 100 {
		if len(descendants(sh.Process.Pid)) == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond) // the shell has yet to fork
	}
	t.Errorf("descendants of sh -c 'sleep 1; true': %v, want the sleep", descendants(sh.Process.Pid))
}
