package sandbox

import (
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// goDisposable runs f in a new goroutine locked to an OS thread of its
// own, which the runtime ends when f returns: whatever f changes in that
// thread alone (a Landlock domain, no_new_privs) ends with it, and no
// other goroutine ever runs on it. goDisposable returns once f has begun;
// done is closed when f has returned (the thread ends moments later).
//
// The thread is never the main thread, which the runtime parks instead of
// ending, nor one with child processes: the end of a thread sends each of
// its children their parent-death signal (https://go.dev/issue/27505), so
// a child another goroutine had started from it with
// SysProcAttr.Pdeathsig would be killed. A thread that fails either test
// is held while a further goroutine tries again, so that it lands on
// another thread, and then released unchanged. Threads the runtime makes
// while f runs are cloned from its template thread, never from a locked
// one, so they do not inherit f's changes either.
func goDisposable(f func()) (done <-chan struct{}) {
	d := make(chan struct{})
	startDisposable(f, d)
	return d
}

func startDisposable(f func(), done chan<- struct{}) {
	begun := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() || threadHasChildren() {
			// While this goroutine holds the thread, the next one
			// cannot get it.
			startDisposable(f, done)
			runtime.UnlockOSThread()
			close(begun)
			return
		}
		close(begun)
		defer close(done)
		f()
		// Return still locked: the runtime ends the thread.
	}()
	<-begun
}

// threadHasChildren reports whether the calling thread has started child
// processes that are still there, running or not yet reaped: waitid for
// this thread's children alone (__WNOTHREAD), of any kind (__WALL),
// without waiting (WNOHANG) and without reaping (WNOWAIT), fails with
// ECHILD only when it has none. (Reading /proc/thread-self/children
// would tell the same, but once a thread's /proc entries exist, reaping
// its process costs the kernel milliseconds.)
func threadHasChildren() bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WNOTHREAD|unix.WALL, nil)
		if err != syscall.EINTR {
			return err != syscall.ECHILD
		}
	}
}
