package process

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// groupAttr puts a shell in a process group of its own (pgid = pid) and
// kills it if the host dies (Pdeathsig). Pdeathsig reaches the shell only;
// its children are found by the group sweep at recovery.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// ptyAttr starts a shell as a session leader with the pty as its
// controlling terminal (its group id is its pid, as with groupAttr).
func ptyAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true, Pdeathsig: syscall.SIGKILL}
}

// sweepGroup kills (SIGKILL) every process in group pgid whose environment
// carries MarkerEnv=id and returns their pids. Members without the marker
// (a reused group id, or a child that cleared its environment) are left.
func sweepGroup(pgid int, id string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	marker := []byte(MarkerEnv + "=" + id + "\x00")
	var killed []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if procGroup(pid) != pgid {
			continue
		}
		envb, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append([]byte{0}, envb...), append([]byte{0}, marker...)) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// procGroup returns the process group of pid from /proc/pid/stat, or -1.
func procGroup(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// pid (comm) state ppid pgrp …; comm may hold spaces and parens.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return -1
	}
	g, err := strconv.Atoi(f[2])
	if err != nil {
		return -1
	}
	return g
}
