package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procStat is what containment reads of /proc/PID/stat.
type procStat struct {
	state byte   // R, S, D, Z, T …
	ppid  int    // parent
	pgid  int    // process group
	start uint64 // start time in clock ticks since boot
}

// readStat reads /proc/pid/stat; ok is false when pid does not exist.
func readStat(pid int) (st procStat, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid pgrp … starttime is field 22; comm may hold
	// spaces and parentheses, so count from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, false
	}
	pgid, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, false
	}
	return procStat{state: f[0][0], ppid: ppid, pgid: pgid, start: start}, true
}

// descendants returns the living (not zombie) descendants of root found in
// one scan of /proc. Zombies are skipped: they hold no children (those are
// re-parented when a process exits) and cannot be killed again.
func descendants(root int) map[int]bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := make(map[int][]int)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.state != 'Z' {
			children[st.ppid] = append(children[st.ppid], pid)
		}
	}
	out := make(map[int]bool)
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !out[c] {
				out[c] = true
				queue = append(queue, c)
			}
		}
	}
	return out
}

// killDescendants sends SIGKILL to every living descendant of root and
// returns how many it found. A pid is signalled through a pidfd opened
// after checking, on that pidfd's process, that its parent is still root
// or one of the descendants: a pid reused between the scan and the
// signal is not hit.
func killDescendants(root int) int {
	ds := descendants(root)
	for pid := range ds {
		fd, err := unix.PidfdOpen(pid, 0)
		if errors.Is(err, syscall.ENOSYS) {
			// Before Linux 5.3: check and kill, with a tiny window.
			if st, ok := readStat(pid); ok && (st.ppid == root || ds[st.ppid]) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			continue
		}
		if err != nil {
			continue // gone
		}
		if st, ok := readStat(pid); ok && (st.ppid == root || ds[st.ppid]) {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		unix.Close(fd)
	}
	return len(ds)
}

// killTree kills every descendant of root, over and over until none is
// left alive or the deadline passes: a process that forks while it is
// being killed leaves a child, re-parented to root when root is a
// subreaper, which the next pass finds. It returns the number of
// descendants still alive at the end (0 on success).
func killTree(root int, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		n := killDescendants(root)
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		// SIGKILL takes effect asynchronously; look again shortly.
		time.Sleep(time.Millisecond)
	}
}

// selfStart returns this process's start time for temporary directory
// names, 0 if unknown.
func selfStart() uint64 {
	st, _ := readStat(os.Getpid())
	return st.start
}

// ownerAlive reports whether the process pid that started at start (as in
// /proc/pid/stat) still runs. A pid reused by another process is not the
// owner.
func ownerAlive(pid int, start uint64) bool {
	st, ok := readStat(pid)
	return ok && st.state != 'Z' && st.start == start
}

// ownedByMe reports whether fi belongs to this process's effective user.
func ownedByMe(fi fs.FileInfo) bool {
	s, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(s.Uid) == os.Geteuid()
}
