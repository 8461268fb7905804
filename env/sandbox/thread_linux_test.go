package sandbox

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDisposableThread: f runs on a thread of its own, never the main
// one, that ends after f; what f changes in it (here no_new_privs) is
// never seen by another goroutine, during f or after.
func TestDisposableThread(t *testing.T) {
	stop := make(chan struct{})
	var tainted atomic.Int64
	var wg sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 0 {
					tainted.Add(1)
				}
				runtime.Gosched()
			}
		})
	}
	var tids []int
	for range 50 {
		var tid int
		<-goDisposable(func() {
			tid = unix.Gettid()
			if tid == unix.Getpid() {
				t.Error("ran on the main thread")
			}
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				t.Error(err)
			}
			runtime.Gosched() // let the pollers at the other threads meanwhile
		})
		tids = append(tids, tid)
	}
	close(stop)
	wg.Wait()
	if n := tainted.Load(); n > 0 {
		t.Errorf("other goroutines saw no_new_privs %d times", n)
	}
	waitThreadsGone(t, tids)
}

// waitThreadsGone waits until the threads tids of this process have
// ended, which the runtime does after their goroutines have returned.
func waitThreadsGone(t *testing.T, tids []int) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for _, tid := range tids {
		for {
			if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); os.IsNotExist(err) {
				break
			}
			select {
			case <-tick.C:
			case <-deadline.C:
				t.Fatalf("thread %d still there", tid)
			}
		}
	}
}

// TestDisposableThreadSparesChildren: a thread that started a child with
// a parent-death signal, then returned to the runtime's pool, is never
// the one that ends, so the child lives on.
func TestDisposableThreadSparesChildren(t *testing.T) {
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}()
	for range 2 * runtime.GOMAXPROCS(0) {
		started := make(chan *exec.Cmd)
		go func() {
			// Lock only so that each child comes from a thread of its own.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c := exec.Command("/bin/sleep", "300")
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := c.Start(); err != nil {
				t.Error(err)
				c = nil
			}
			started <- c
		}()
		if c := <-started; c != nil {
			cmds = append(cmds, c)
		}
	}
	var tids []int
	for range 100 {
		<-goDisposable(func() { tids = append(tids, unix.Gettid()) })
	}
	// A thread's end sends the signal before the thread disappears; a
	// child it killed dies of SIGKILL, not of the SIGTERM sent now.
	waitThreadsGone(t, tids)
	for _, c := range cmds {
		c.Process.Signal(syscall.SIGTERM)
		c.Wait()
		if ws := c.ProcessState.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGTERM {
			t.Errorf("child %d: %v; a thread with children ended", c.Process.Pid, c.ProcessState)
		}
	}
	cmds = nil
}
