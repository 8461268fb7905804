package lease

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unicode"
)

// ErrHostHeld reports a store that another live weft process uses: a host
// serving it, or, for a host that wants to start, an in-process run.
// The error that wraps it says which, with the serving host's pid when it
// can be read.
var ErrHostHeld = errors.New("store is in use by another weft process")

// hostFile is the name of a store's host lease in its lock directory. Session
// leases are named after session ids ("ses_…"), so the names cannot clash.
const hostFile = "host.lock"

// AcquireHost takes the store-wide host lease in dir (created 0700 if
// missing) exclusively, for a process that serves the store: one that runs
// process recovery and owns every session it loads. It does not block: when
// another process holds the lease, shared or exclusive, it returns an error
// wrapping [ErrHostHeld] and has changed nothing.
//
// holder names the process ("weft serve"); it is written with the pid
// into the lease file, so that a refused process can say who serves the
// store. Release the lease after the host has closed.
func AcquireHost(dir, holder string) (*Lease, error) {
	f, err := openHost(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("host lease %s: %w", f.Name(), err)
		}
		// A shared probe tells a serving host from in-process runs.
		if syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			return nil, &hostHeldError{msg: "another weft process runs on this store in-process (weft run --local?)"}
		}
		return nil, servedError(f)
	}
	note := strconv.Itoa(os.Getpid()) + "\n" + holder + "\n"
	if err := writeNote(f, note); err != nil {
		f.Close()
		return nil, fmt.Errorf("host lease %s: %w", f.Name(), err)
	}
	return &Lease{f: f}, nil
}

// AcquireHostShared takes the store-wide host lease in dir (created 0700 if
// missing) shared, for a one-shot process that uses the store in-process
// without serving it (a local run, which takes the leases of the sessions
// it touches). Any number of shared holders may run at once, but not while
// a host holds the lease, and no host can start while one runs. It does not
// block: when a host serves the store it returns an error wrapping
// [ErrHostHeld] naming the host's pid.
func AcquireHostShared(dir string) (*Lease, error) {
	f, err := openHost(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("host lease %s: %w", f.Name(), err)
		}
		return nil, servedError(f)
	}
	return &Lease{f: f}, nil
}

func openHost(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lease directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, hostFile)
	// O_CLOEXEC (set by os) keeps the lock out of the host's children: a
	// background process that outlives a killed host must not hold it.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("host lease %s: %w", path, err)
	}
	return f, nil
}

// writeNote replaces the lease file's content with note and syncs it.
func writeNote(f *os.File, note string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(note), 0); err != nil {
		return err
	}
	return f.Sync()
}

// servedError describes the host that holds f's lease exclusively, from
// the note it wrote: "host pid N (holder) already serves this store".
func servedError(f *os.File) error {
	b, _ := io.ReadAll(io.NewSectionReader(f, 0, 512))
	pidLine, rest, _ := bytes.Cut(b, []byte("\n"))
	holder, _, _ := bytes.Cut(rest, []byte("\n"))
	pid, err := strconv.Atoi(string(pidLine))
	if err != nil || pid <= 0 {
		return &hostHeldError{msg: "another weft process already serves this store"}
	}
	msg := "host pid " + strconv.Itoa(pid)
	if h := strings.TrimSpace(string(holder)); h != "" && !strings.ContainsFunc(h, notPrint) {
		msg += " (" + h + ")"
	}
	return &hostHeldError{msg: msg + " already serves this store"}
}

func notPrint(r rune) bool { return !unicode.IsPrint(r) }

// hostHeldError is ErrHostHeld with its own words.
type hostHeldError struct{ msg string }

func (e *hostHeldError) Error() string        { return e.msg }
func (e *hostHeldError) Is(target error) bool { return target == ErrHostHeld }
