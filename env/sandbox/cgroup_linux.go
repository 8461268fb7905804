package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"weft.dev/weft/internal/mountinfo"
)

// Controllers of cgroup version 1 that commands use.
const (
	ctrlPids    = "pids"    // Limits.Processes; the tree's members, to kill them all
	ctrlMemory  = "memory"  // Limits.Memory
	ctrlCPUAcct = "cpuacct" // Limits.CPUTime: the tree's CPU time
	ctrlCPU     = "cpu"     // one scheduling entity per group, so that no tree starves the host
)

// cgroupRoot is where this process may make cgroups: its own cgroup in
// each version 1 hierarchy of the controllers commands use.
type cgroupRoot struct {
	// own maps each usable controller to this process's cgroup directory
	// in its hierarchy; controllers mounted together share a directory.
	own map[string]string
	// memsw: swap is accounted (memory.memsw.limit_in_bytes exists).
	memsw bool
	// errs says why a controller is unusable, for Status.
	errs map[string]error
}

// has reports whether ctrl is usable.
func (r *cgroupRoot) has(ctrl string) bool { return r != nil && r.own[ctrl] != "" }

// cgroups probes once per process which controllers this process may
// make cgroups in. The answer depends on the machine's mounts and the
// process's rights, which weft does not change.
var cgroups = sync.OnceValue(func() *cgroupRoot { return probeCgroups("/proc/self/cgroup", "/proc/self/mountinfo") })

// probeCgroups reads this process's cgroups (cgroupFile, as
// /proc/self/cgroup) and the mounts (mountinfoFile) and checks, by making
// and removing a group, that it may make groups in each hierarchy of the
// controllers commands use. Only version 1 hierarchies are used: a
// version 2 hierarchy would need weft to move itself into a leaf of its
// own cgroup first, which is not done yet.
func probeCgroups(cgroupFile, mountinfoFile string) *cgroupRoot {
	r := &cgroupRoot{own: map[string]string{}, errs: map[string]error{}}
	want := []string{ctrlPids, ctrlMemory, ctrlCPUAcct, ctrlCPU}
	fail := func(err error) *cgroupRoot {
		for _, c := range want {
			r.errs[c] = err
		}
		return r
	}
	paths, err := readCgroupFile(cgroupFile)
	if err != nil {
		return fail(err)
	}
	mounts, err := readCgroupMounts(mountinfoFile)
	if err != nil {
		return fail(err)
	}
	probed := map[string]error{}
	for _, ctrl := range want {
		m, ok := mounts[ctrl]
		p, in := paths[ctrl]
		switch {
		case !ok:
			r.errs[ctrl] = fmt.Errorf("no cgroup v1 hierarchy of %s is mounted", ctrl)
			continue
		case !in:
			r.errs[ctrl] = fmt.Errorf("this process is in no cgroup of %s", ctrl)
			continue
		}
		rel, ok := strings.CutPrefix(p, m.root)
		if !ok {
			r.errs[ctrl] = fmt.Errorf("this process's %s cgroup %s lies outside the mount of %s", ctrl, p, m.root)
			continue
		}
		dir := filepath.Join(m.point, rel)
		err, done := probed[dir]
		if !done {
			err = probeMkdir(dir)
			probed[dir] = err
		}
		if err != nil {
			r.errs[ctrl] = err
			continue
		}
		r.own[ctrl] = dir
	}
	if d := r.own[ctrlMemory]; d != "" {
		_, err := os.Stat(filepath.Join(d, "memory.memsw.limit_in_bytes"))
		r.memsw = err == nil
	}
	return r
}

// probeMkdir makes and removes a group in dir.
func probeMkdir(dir string) error {
	name := filepath.Join(dir, fmt.Sprintf("weft-probe-%d", os.Getpid()))
	if err := os.Mkdir(name, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cannot make a cgroup: %w", err)
	}
	if err := syscall.Rmdir(name); err != nil {
		return fmt.Errorf("cannot remove a cgroup: %w", err)
	}
	return nil
}

// readCgroupFile maps each version 1 controller to this process's cgroup
// path in its hierarchy, from lines "ID:CONTROLLERS:PATH".
func readCgroupFile(name string) (map[string]string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 || f[1] == "" {
			continue // the version 2 hierarchy, "0::PATH"
		}
		for _, c := range strings.Split(f[1], ",") {
			out[c] = f[2]
		}
	}
	return out, nil
}

// cgroupMount is a mount of a version 1 hierarchy: where, and which
// cgroup path its root is.
type cgroupMount struct{ point, root string }

// readCgroupMounts maps each version 1 controller to a mount of its
// hierarchy, from /proc/self/mountinfo.
func readCgroupMounts(name string) (map[string]cgroupMount, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	out := map[string]cgroupMount{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || g[0] != "cgroup" {
			continue
		}
		m := cgroupMount{point: mountinfo.Unescape(f[4]), root: mountinfo.Unescape(f[3])}
		for _, opt := range strings.Split(g[2], ",") {
			if _, seen := out[opt]; !seen {
				out[opt] = m
			}
		}
	}
	return out, sc.Err()
}

// cgroupNode is one group in each hierarchy it uses: the host's
// commands, a session's, or one command's tree.
type cgroupNode struct {
	// dir maps each controller the group uses to its directory.
	dir map[string]string
}

// dirs returns the node's distinct directories, in a stable order.
func (n *cgroupNode) dirs() []string {
	var out []string
	for _, d := range n.dir {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// rootNode is this process's own cgroups, the parent of every group it
// makes.
func (r *cgroupRoot) rootNode() *cgroupNode {
	n := &cgroupNode{dir: map[string]string{}}
	for c, d := range r.own {
		n.dir[c] = d
	}
	return n
}

// child makes the group name under n in the hierarchies of ctrls (those
// of n's that are usable) and sets limits l in it: pids.max (with room
// for the thread that forks into it), memory.limit_in_bytes and, with
// swap accounted, memory.memsw.limit_in_bytes. On failure nothing is
// left.
func (n *cgroupNode) child(r *cgroupRoot, name string, ctrls []string, l Limits) (*cgroupNode, error) {
	c := &cgroupNode{dir: map[string]string{}}
	made := map[string]bool{}
	fail := func(err error) (*cgroupNode, error) {
		c.remove()
		return nil, err
	}
	for _, ctrl := range ctrls {
		parent := n.dir[ctrl]
		if parent == "" {
			continue
		}
		d := filepath.Join(parent, name)
		c.dir[ctrl] = d
		if made[d] {
			continue
		}
		made[d] = true
		if err := os.Mkdir(d, 0o755); err != nil {
			delete(c.dir, ctrl)
			return fail(fmt.Errorf("cgroup: %w", err))
		}
	}
	if d := c.dir[ctrlPids]; d != "" && l.Processes > 0 {
		if err := writeCgroup(d, "pids.max", strconv.Itoa(l.Processes+1)); err != nil {
			return fail(err)
		}
	}
	if d := c.dir[ctrlMemory]; d != "" && l.Memory > 0 {
		v := strconv.FormatInt(l.Memory, 10)
		if err := writeCgroup(d, "memory.limit_in_bytes", v); err != nil {
			return fail(err)
		}
		if r.memsw {
			if err := writeCgroup(d, "memory.memsw.limit_in_bytes", v); err != nil {
				return fail(err)
			}
		}
	}
	return c, nil
}

func writeCgroup(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// attachThread moves the calling thread (tid) into the node's groups; a
// process it forks afterwards starts in them.
func (n *cgroupNode) attachThread(tid int) error {
	s := strconv.Itoa(tid)
	for _, d := range n.dirs() {
		if err := writeCgroup(d, "tasks", s); err != nil {
			return err
		}
	}
	return nil
}

// procs returns the processes in the node's pids group, or in another of
// its groups without one.
func (n *cgroupNode) procs() []int {
	d := n.dir[ctrlPids]
	if d == "" {
		ds := n.dirs()
		if len(ds) == 0 {
			return nil
		}
		d = ds[0]
	}
	b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// killAll sends SIGKILL to every process in the node's groups and
// returns how many there were. A group's members are the tree's (a
// process cannot leave a cgroup without writing to cgroupfs, which the
// sandbox closes), so no stranger is hit, whatever its user or group.
func (n *cgroupNode) killAll() int {
	ps := n.procs()
	for _, pid := range ps {
		killMember(pid)
	}
	return len(ps)
}

// killMember kills pid, a process listed in a command's cgroup, unless it
// is this process: one of its threads may be in the group for a moment,
// forking the command's supervisor.
func killMember(pid int) {
	if pid != os.Getpid() && pid > 0 {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// remove removes the node's groups. Groups still holding processes (a
// tree that outlived its supervisor) have them killed first, for a
// bounded time; what is still busy then is left, for [RemoveStale]'s
// sweep at the next start.
func (n *cgroupNode) remove() error {
	var errs []error
	for _, d := range n.dirs() {
		err := syscall.Rmdir(d)
		deadline := time.Now().Add(killTreeLimit)
		for err == syscall.EBUSY && time.Now().Before(deadline) {
			killGroupDir(d)
			time.Sleep(time.Millisecond)
			err = syscall.Rmdir(d)
		}
		if err != nil && err != syscall.ENOENT {
			errs = append(errs, fmt.Errorf("cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// killGroupDir kills every process in the group d.
func killGroupDir(d string) {
	b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			killMember(pid)
		}
	}
}

// readUint reads a number from file in the group of ctrl.
func (n *cgroupNode) readUint(ctrl, file string) (uint64, bool) {
	d := n.dir[ctrl]
	if d == "" {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(d, file))
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// readKey reads the number after key in a flat keyed file ("max 3",
// "oom_kill 1") in the group of ctrl.
func (n *cgroupNode) readKey(ctrl, file, key string) (uint64, bool) {
	d := n.dir[ctrl]
	if d == "" {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(d, file))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// counters are what a node's groups have counted, read at a command's
// start and end to tell which limit it ran into.
type counters struct {
	forkFailed uint64 // pids.events max: forks refused by a pids limit
	oomKills   uint64 // memory.oom_control oom_kill: processes killed over the memory limit
	cpu        time.Duration
}

func (n *cgroupNode) counters() counters {
	var c counters
	c.forkFailed, _ = n.readKey(ctrlPids, "pids.events", "max")
	c.oomKills, _ = n.readKey(ctrlMemory, "memory.oom_control", "oom_kill")
	if ns, ok := n.readUint(ctrlCPUAcct, "cpuacct.usage"); ok {
		c.cpu = time.Duration(ns)
	}
	return c
}

// removeStaleCgroups removes the cgroups that weft processes which are
// gone left beneath this process's own: the groups of a [Sessions]
// (weft-PID-START) and of commands without one (named as their
// temporary directories), each with the groups beneath it, killing what
// they still hold.
func removeStaleCgroups() error {
	r := cgroups()
	var errs []error
	for _, own := range r.rootNode().dirs() {
		ents, err := os.ReadDir(own)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() || !staleGroupName(e.Name()) {
				continue
			}
			errs = append(errs, removeGroupTree(filepath.Join(own, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// staleGroupName reports whether name is a group weft makes whose owner
// is gone.
func staleGroupName(name string) bool {
	if pid, start, ok := parseTempName(name); ok {
		return !ownerAlive(pid, start)
	}
	rest, ok := strings.CutPrefix(name, "weft-")
	if !ok {
		return false
	}
	p, s, ok := strings.Cut(rest, "-")
	if !ok {
		return false
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(s, 10, 64)
	return err1 == nil && err2 == nil && pid > 0 && !ownerAlive(pid, start)
}

// removeGroupTree removes the group d and every group beneath it,
// deepest first.
func removeGroupTree(d string) error {
	ents, _ := os.ReadDir(d)
	var errs []error
	for _, e := range ents {
		if e.IsDir() {
			errs = append(errs, removeGroupTree(filepath.Join(d, e.Name())))
		}
	}
	errs = append(errs, (&cgroupNode{dir: map[string]string{"": d}}).remove())
	return errors.Join(errs...)
}
