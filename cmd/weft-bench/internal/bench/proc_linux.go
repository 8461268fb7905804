package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture Go supports.
const userHZ = 100

// setChildAttr puts c in a process group of its own, so that killTree
// reaches everything it starts, and has the kernel kill it if the thread
// that started it (and so this process) dies first.
func setChildAttr(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killTree kills the process group of p (see setChildAttr).
func killTree(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return p.Kill()
	}
	return nil
}

// selfCPU returns the user and system CPU time this process has used so
// far (getrusage of RUSAGE_SELF: not its children's).
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// treeCPU returns the user and system CPU time used so far by pid and
// every live descendant, including what their children that were waited
// for used (cutime, cstime), in USER_HZ ticks.
func treeCPU(pid int) (time.Duration, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("read /proc: %w", err)
	}
	type stat struct{ ppid, ticks int64 }
	stats := map[int]stat{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		f, ok := statFields(b)
		if !ok {
			continue
		}
		var ticks int64
		for _, i := range []int{13, 14, 15, 16} { // utime stime cutime cstime
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += v
		}
		ppid, _ := strconv.ParseInt(f[3], 10, 64)
		stats[p] = stat{ppid, ticks}
	}
	if _, ok := stats[pid]; !ok {
		return 0, fmt.Errorf("process %d: not found", pid)
	}
	var total int64
	for p, s := range stats {
		for q := p; ; {
			if q == pid {
				total += s.ticks
				break
			}
			up, ok := stats[q]
			if !ok || up.ppid == 0 || int(up.ppid) == q {
				break
			}
			q = int(up.ppid)
		}
	}
	return time.Duration(total) * time.Second / userHZ, nil
}

// statFields splits /proc/PID/stat into its fields, field 2 (the command,
// in parentheses, which may hold spaces) as one.
func statFields(b []byte) ([]string, bool) {
	i := bytes.LastIndexByte(b, ')')
	j := bytes.IndexByte(b, '(')
	if i < 0 || j < 0 || j > i {
		return nil, false
	}
	rest := strings.Fields(string(b[i+1:]))
	f := append([]string{string(b[:j-1]), string(b[j+1 : i])}, rest...)
	return f, len(f) > 16
}

// memStat is the memory of a process, from /proc/PID/status.
type memStat struct {
	RSS, Anon, File, HWM int64 // bytes
}

// readMem reads VmRSS, RssAnon, RssFile and VmHWM of pid ("self" when 0).
func readMem(pid int) (memStat, error) {
	name := "/proc/self/status"
	if pid != 0 {
		name = fmt.Sprintf("/proc/%d/status", pid)
	}
	f, err := os.Open(name)
	if err != nil {
		return memStat{}, err
	}
	defer f.Close()
	var m memStat
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = n << 10
		case "RssAnon":
			m.Anon = n << 10
		case "RssFile":
			m.File = n << 10
		case "VmHWM":
			m.HWM = n << 10
		}
	}
	if err := sc.Err(); err != nil {
		return memStat{}, fmt.Errorf("%s: %w", name, err)
	}
	if m.RSS == 0 {
		return memStat{}, fmt.Errorf("%s: no VmRSS", name)
	}
	return m, nil
}

// watchPeak samples the resident memory of the process tree of pid (a
// child that has just been started) every interval, and stop returns the
// largest value seen: the sum of VmRSS over the tree, or the root's own
// VmHWM if larger. It does not use the child's ru_maxrss: Linux counts in
// it the high-water mark of the process that forked it (the address space
// an exec replaces), so a child of the bench would never look smaller
// than the bench itself. stop waits for the sampler to end; it may be
// called once.
func watchPeak(pid int, interval time.Duration) (stop func() int64) {
	done := make(chan struct{})
	result := make(chan int64, 1)
	go func() {
		var peak int64
		sample := func() {
			root, err := readMem(pid)
			if err != nil {
				return // not yet readable, or exited
			}
			sum := root.RSS
			for _, c := range descendants(pid) {
				if m, err := readMem(c); err == nil {
					sum += m.RSS
				}
			}
			peak = max(peak, sum, root.HWM)
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			sample()
			select {
			case <-done:
				result <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-result
	}
}

// descendants returns the live descendants of pid, from
// /proc/PID/task/TID/children; nil where the kernel lacks that file.
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil && len(out) < 1000 {
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}
