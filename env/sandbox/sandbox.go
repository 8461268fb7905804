package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

// HelperArg is the hidden first argument that makes the weft binary act as
// the sandbox helper; see [IsHelper].
const HelperArg = "__weft_sandbox"

// Network policies, the values of [Config.Network].
const (
	// NetworkDeny takes the network away: the command's tree gets a
	// network namespace whose only interface is its loopback, or where
	// none can be made, a seccomp filter refuses every socket but UNIX,
	// netlink and plain TCP sockets, and Landlock refuses TCP bind and
	// connect (ABI 4 or later). [Status.NetworkDeniedBy] says which.
	NetworkDeny = "deny"
	// NetworkAllow leaves the network unrestricted.
	NetworkAllow = "allow"
)

// Containment modes, the values of [Config.Containment] and
// [Status.Containment]; see [Containment] and docs/sandbox.md.
const (
	// ContainmentPIDNamespace runs the helper as init of a PID namespace
	// of its own: when it exits, the kernel kills everything in it.
	ContainmentPIDNamespace = "pid-namespace"
	// ContainmentSubreaper runs the helper as a child subreaper that
	// kills every descendant it has before it exits.
	ContainmentSubreaper = "subreaper"
	// ContainmentNone is reported off Linux, where an (unsandboxed)
	// command runs directly and its tree is not contained.
	ContainmentNone = "none"
)

// What takes a denied network away, the values of
// [Status.NetworkDeniedBy]; docs/sandbox.md has the table.
const (
	// DeniedByNamespace: the tree runs in a network namespace whose only
	// interface is its loopback (shared by the commands of a session,
	// see [Sessions]): no packet of any protocol leaves it, and nothing
	// outside can reach into it.
	DeniedByNamespace = "network namespace"
	// DeniedBySeccomp: where no network namespace can be made, a seccomp
	// filter refuses every socket but UNIX and netlink ones and plain TCP
	// (UDP, ICMP, raw and packet sockets, Multipath TCP, SCTP, …) and
	// io_uring, and Landlock (ABI 4 or later) refuses TCP bind and
	// connect; below ABI 4 the filter refuses TCP sockets too.
	DeniedBySeccomp = "seccomp and Landlock"
	// DeniedByLandlock: Landlock alone, where no filter can be installed
	// either (an architecture the filter does not know): TCP from ABI 4,
	// UDP from ABI 10.
	DeniedByLandlock = "Landlock"
)

// ErrNoLandlock is wrapped by the error [Command] returns when the kernel
// has no usable Landlock and the policy is not unsandboxed.
var ErrNoLandlock = errors.New("no Landlock")

// RefusedError is the error of [Command] when it will not run a command
// because the kernel cannot sandbox it. It wraps [ErrNoLandlock].
type RefusedError struct {
	// Reason says why Landlock is unavailable, as [Probe] reported it.
	Reason string
}

// Error returns the refusal with the way out, for the user to read.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("shell refused: this kernel has no Landlock (%s); set \"unsandboxed\": true in the config to run shells without a sandbox", e.Reason)
}

// Unwrap returns [ErrNoLandlock].
func (e *RefusedError) Unwrap() error { return ErrNoLandlock }

// Config is the part of a [Policy] shared by every command of a host; the
// command line sets it from the user's configuration. The zero value
// sandboxes with the network denied.
type Config struct {
	// Unsandboxed runs commands without Landlock: the shell reaches
	// whatever the user running weft reaches, and only gets the private
	// TMPDIR and the containment of its process tree (on Linux the helper
	// still supervises it; elsewhere the shell is started directly). It
	// is the user's explicit choice ("unsandboxed": true in the config);
	// nothing sets it by default, and without it a kernel lacking
	// Landlock makes [Command] fail.
	Unsandboxed bool
	// Network is [NetworkDeny] or [NetworkAllow]. Empty means
	// [NetworkDeny]. Other values make [Command] fail.
	Network string
	// Executable is the binary run as the helper, where commands run
	// under it (see the package documentation). Its main must call [Main]
	// when [IsHelper] reports true, or the re-executed program runs its
	// own main with the helper's arguments. Empty means /proc/self/exe on
	// Linux, the running binary even if it was replaced on disk.
	Executable string
	// ReadOnly lists extra host paths (directories or files) that
	// commands may read and execute beyond the system list, for example
	// /opt or /nix. Paths must be absolute; missing ones are skipped.
	ReadOnly []string
	// TempRoot is the directory in which each command's private
	// temporary directory is made, named weft-cmd-PID-START-* after the
	// weft process that made it, so that [RemoveStale] can tell a dead
	// owner's leftovers. Empty means [os.TempDir]. It must be absolute.
	TempRoot string
	// Containment is how a command's process tree is contained: empty
	// means the best this process can do ([Containment]):
	// [ContainmentPIDNamespace] where it can make PID namespaces, else
	// [ContainmentSubreaper]. ContainmentSubreaper forces the fallback
	// (for tests, or where namespaces misbehave); ContainmentPIDNamespace
	// makes [Command] fail where no namespace can be made. Other values
	// make Command fail.
	Containment string
	// LandlockABI caps the Landlock ABI commands are confined with: 0
	// means the kernel's ([Probe]); n (1 or more) applies only what ABI
	// n restricts, as a kernel without the later ABIs would, and is
	// lowered to the kernel's when that is older. It lets tests check
	// the confinement docs/sandbox.md promises for older kernels on a
	// newer one, and would let a user step back from a later ABI that
	// breaks a program. Negative values make [Command] fail.
	LandlockABI int
	// Limits bound each command's process tree; zero fields set no
	// limit. A session's own limits ([ForBinding]) replace them field by
	// field. Negative values make [Command] fail.
	Limits Limits
	// Sessions, when set, is what the commands of each session share (a
	// network namespace, a cgroup; see [Sessions]): commands that name
	// their session in [Policy.Session] use it. Nil means each command
	// stands alone: a network namespace made for it, and its cgroups
	// directly beneath this process's.
	Sessions *Sessions
}

// Mount is a host directory a command may use.
type Mount struct {
	// Path is the absolute host path.
	Path string `json:"path"`
	// Write grants creating, writing, renaming and removing under Path;
	// false grants reading, listing and executing only.
	Write bool `json:"write,omitempty"`
}

// Policy is what one command may reach: the host-wide [Config] and the
// session's mounts.
type Policy struct {
	Config
	// Mounts are the session's mounts, as [ForBinding] makes them.
	Mounts []Mount
	// Session names the session the command belongs to, which shares
	// [Config.Sessions] with its other commands; empty means none.
	Session string
}

// ForBinding returns the policy for a command run in b's mounts under
// cfg: each mount's host path, writable when the mount is read-write, the
// binding's session, and its network policy and limits where the session
// has its own. A nil Binding gives a policy without mounts or session.
func ForBinding(cfg Config, b *env.Binding) Policy {
	p := Policy{Config: cfg, Session: b.Session()}
	if n := b.Network(); n != "" {
		p.Network = n // the session's own policy wins over the host's default
	}
	if l := b.Limits(); l != nil {
		p.Limits = LimitsOf(*l).Or(cfg.Limits)
	}
	p.ReadOnly = append([]string(nil), cfg.ReadOnly...)
	for _, m := range b.Mounts() {
		p.Mounts = append(p.Mounts, Mount{Path: m.Path, Write: m.Mode == event.ModeReadWrite})
	}
	return p
}

func (p *Policy) network() string {
	if p.Network == "" {
		return NetworkDeny
	}
	return p.Network
}

func (p *Policy) validate() error {
	if n := p.network(); n != NetworkDeny && n != NetworkAllow {
		return fmt.Errorf("sandbox: network policy %q is neither %q nor %q", p.Network, NetworkDeny, NetworkAllow)
	}
	for _, m := range p.Mounts {
		if !filepath.IsAbs(m.Path) {
			return fmt.Errorf("sandbox: mount path %q is not absolute", m.Path)
		}
	}
	for _, r := range p.ReadOnly {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("sandbox: read-only path %q is not absolute", r)
		}
	}
	if p.LandlockABI < 0 {
		return fmt.Errorf("sandbox: Landlock ABI cap %d is negative", p.LandlockABI)
	}
	if p.TempRoot != "" && !filepath.IsAbs(p.TempRoot) {
		return fmt.Errorf("sandbox: temporary root %q is not absolute", p.TempRoot)
	}
	return p.Limits.validate("command")
}

// LimitsOf converts the limits of a session or a configuration file, as
// they are stored and sent, to [Limits].
func LimitsOf(l event.Limits) Limits {
	return Limits{
		Processes: l.Processes,
		Memory:    l.MemoryBytes,
		CPUTime:   time.Duration(l.CPUTimeMs) * time.Millisecond,
		FileSize:  l.FileSizeBytes,
	}
}

// Status says how a command is confined.
type Status struct {
	// Unsandboxed reports that Landlock is not applied.
	Unsandboxed bool
	// ABI is the Landlock ABI version commands are confined with: the
	// kernel's (see [Probe]), or [Config.LandlockABI] when that is
	// lower; 0 when unsandboxed or unavailable.
	ABI int
	// Network is the network policy asked for.
	Network string
	// NetworkDeniedBy says what takes the network away when the policy
	// denies it ([DeniedByNamespace], [DeniedBySeccomp],
	// [DeniedByLandlock]); empty when nothing does.
	NetworkDeniedBy string
	// TCPDenied reports that no TCP connection can leave or reach the
	// command: the policy denies the network, in a network namespace,
	// under the seccomp filter, or under Landlock ABI 4 or later.
	TCPDenied bool
	// UDPDenied reports the same of UDP: in a network namespace, under
	// the seccomp filter, or under Landlock ABI 10 or later.
	UDPDenied bool
	// Limits are the limits of the command's tree, and LimitsBy what
	// enforces each; SessionLimits and HostLimits those of its session's
	// commands together and of the host's ([Sessions]), enforced by
	// cgroups where LimitsBy names one.
	Limits        Limits
	LimitsBy      LimitMechanisms
	SessionLimits Limits
	HostLimits    Limits
	// Containment is how the command's process tree is contained
	// ([ContainmentPIDNamespace], [ContainmentSubreaper] or
	// [ContainmentNone]); empty when unknown or when the command would be
	// refused.
	Containment string
}

// capABI returns the kernel's ABI abi lowered to the cap, if any.
func capABI(abi, cap int) int {
	if cap > 0 && cap < abi {
		return cap
	}
	return abi
}

// newStatus returns the status of a command under p at Landlock ABI abi,
// where netBy would take a denied network away ([networkDeniedBy]). With
// probe unset it does not probe for cgroups: LimitsBy is empty.
func newStatus(p *Policy, abi int, netBy string, probe bool) Status {
	s := Status{Unsandboxed: p.Unsandboxed, Network: p.network()}
	s.Limits = p.Limits
	if probe {
		s.LimitsBy = limitMechanisms(p.Limits)
	}
	if p.Sessions != nil {
		cfg := p.Sessions.Config()
		s.SessionLimits, s.HostLimits = cfg.Session, cfg.Host
		if p.Session == "" {
			s.SessionLimits = Limits{}
		}
	}
	if p.Unsandboxed {
		return s
	}
	s.ABI = abi
	if s.Network == NetworkDeny {
		s.NetworkDeniedBy = netBy
	}
	switch s.NetworkDeniedBy {
	case DeniedByNamespace, DeniedBySeccomp:
		s.TCPDenied, s.UDPDenied = true, true
	case DeniedByLandlock:
		s.TCPDenied, s.UDPDenied = abi >= 4, abi >= 10
	}
	if s.NetworkDeniedBy == DeniedByLandlock && abi < 4 {
		s.NetworkDeniedBy = ""
	}
	return s
}

// Status probes the kernel and returns how a command run under c would
// be confined; ABI 0 without Unsandboxed means [Command] would refuse.
// For version output, tool descriptions and logs.
func (c Config) Status() Status {
	p := &Policy{Config: c}
	abi, _ := Probe()
	mode, flags, err := p.resolveContainment()
	s := newStatus(p, capABI(abi, c.LandlockABI), networkDeniedBy(flags, true), true)
	if err == nil {
		s.Containment = mode
	}
	return s
}

// Confinement is [Config.Status] without the probes of Status, which the
// first time start a process, make a network namespace and cgroups: what
// a host needs at start-up (the shell tool's description), so that a
// one-shot run that never starts a shell does not pay for them. Its
// Containment and LimitsBy are empty, and its NetworkDeniedBy is the
// least the host guarantees: [DeniedBySeccomp] where commands may get a
// network namespace.
func (c Config) Confinement() Status {
	abi, _ := Probe()
	return newStatus(&Policy{Config: c}, capABI(abi, c.LandlockABI), networkDeniedBy(0, false), false)
}

// Warning returns what the policy asked for but the kernel cannot
// enforce, to show next to the command's output, or "" when nothing is
// missing. Running unsandboxed by choice is not a warning.
func (s Status) Warning() string {
	if s.Unsandboxed || s.Network != NetworkDeny || s.UDPDenied {
		return ""
	}
	if s.TCPDenied {
		return fmt.Sprintf("UDP, ICMP and raw sockets are not restricted: no network namespace or seccomp filter can be made here, and this kernel's Landlock ABI %d restricts TCP only", s.ABI)
	}
	return fmt.Sprintf("network is not restricted: no network namespace or seccomp filter can be made here, and this kernel's Landlock ABI %d has no network rules (4 or later is needed)", s.ABI)
}

// String describes the confinement in one line, for tool descriptions
// and logs.
func (s Status) String() string {
	var contained string
	switch s.Containment {
	case ContainmentPIDNamespace:
		contained = "; each command's process tree in a PID namespace"
	case ContainmentSubreaper:
		contained = "; each command's process tree under a subreaper (no PID namespace)"
	case ContainmentNone:
		contained = "; process trees not contained"
	}
	if s.Unsandboxed {
		return "unsandboxed (chosen in the config)" + contained
	}
	if s.ABI <= 0 {
		return "no Landlock: commands are refused"
	}
	return fmt.Sprintf("Landlock ABI %d; %s%s%s", s.ABI, s.NetworkString(), contained, s.limitsString())
}

// Confinement describes in one line what holds a command, for its
// result: its network and its limits, each with what enforces it
// ([Status.NetworkString], [Status.LimitsString]).
func (s Status) Confinement() string {
	if s.Unsandboxed {
		return "unsandboxed; " + s.LimitsString()
	}
	return s.NetworkString() + "; " + s.LimitsString()
}

// NetworkString describes the network a command gets, for its result:
// "network denied (network namespace, loopback only)".
func (s Status) NetworkString() string {
	switch {
	case s.Unsandboxed || s.Network == NetworkAllow:
		return "network allowed"
	case s.NetworkDeniedBy == DeniedByNamespace:
		return "network denied (own network namespace, loopback only)"
	case s.NetworkDeniedBy == DeniedBySeccomp:
		return "network denied (seccomp filter and Landlock: no sockets but UNIX, netlink and refused TCP)"
	case s.UDPDenied:
		return "network denied (Landlock: TCP and UDP)"
	case s.TCPDenied:
		return "TCP denied (Landlock), UDP not restricted"
	}
	return "network not restricted (needs Landlock ABI 4)"
}

// LimitsString describes the command's limits and what enforces them,
// for its result: "limits: processes 1024, memory 2 GiB (cgroup v1),
// file size 1 GiB per file (rlimit)", or "no resource limits".
func (s Status) LimitsString() string {
	return strings.TrimPrefix(s.limitsString(), "; ")
}

func (s Status) limitsString() string {
	var parts []string
	add := func(what, value, by string) {
		if value == "" {
			return
		}
		switch by {
		case "":
			by = "not enforced here"
		case ByRlimit:
			if what != "file size" {
				by += ", per process"
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", what, value, by))
	}
	l := s.Limits
	if l.Processes > 0 {
		add("processes", strconv.Itoa(l.Processes), s.LimitsBy.Processes)
	}
	if l.Memory > 0 {
		add("memory", FormatBytes(l.Memory), s.LimitsBy.Memory)
	}
	if l.CPUTime > 0 {
		add("CPU time", l.CPUTime.String(), s.LimitsBy.CPUTime)
	}
	if l.FileSize > 0 {
		add("file size", FormatBytes(l.FileSize)+" per file", s.LimitsBy.FileSize)
	}
	var out string
	if len(parts) > 0 {
		out = "; limits: " + strings.Join(parts, ", ")
	}
	if !s.SessionLimits.IsZero() && s.LimitsBy.Processes == ByCgroupV1 {
		out += "; session together: " + s.SessionLimits.String()
	}
	if out == "" {
		return "; no resource limits"
	}
	return out
}

// Cmd is a command prepared by [Command]. Use it as the [exec.Cmd] it
// embeds (set Dir, Env, Stdin, Stdout, Stderr, ExtraFiles, SysProcAttr,
// WaitDelay), but start, stop and wait through Cmd's own Start, Kill,
// Wait, Run, Output or CombinedOutput: Start creates the private
// temporary directory, completes Path, Args and SysProcAttr, sets TMPDIR
// and, under Landlock, confines what it starts from a thread of its own;
// Kill ends the whole process tree; Wait removes the directory. Calling
// the embedded exec.Cmd's methods directly bypasses that and, on Linux,
// fails in the helper; a caller that must start the embedded exec.Cmd
// itself calls [Cmd.Prepare] first.
//
// On Linux, Path and Args are not the shell's once started, sandboxed or
// not: what runs is the command's init (an init shell or the helper; see
// the package documentation), whose process is the one in Process and
// ProcessState, and which exits with the shell's status. SysProcAttr
// applies to it: set Setpgid, or Setsid with Setctty for a terminal, as
// for the shell itself; Start adds the namespaces and the parent-death
// signal of the containment and overrides Pdeathsig. Send signals to the
// process group it leads (Setpgid or Setsid): the init shell shares its
// group with the shell and ignores them, the helper forwards what it gets
// to the shell's group. For SIGKILL, which the helper cannot forward, use
// [Cmd.Kill].
//
// A Cmd is not safe for concurrent use, except that Kill may be called
// from any goroutine and Wait may run in another goroutine than Start, as
// with exec.Cmd.
type Cmd struct {
	*exec.Cmd
	// Status is how the command is confined and contained.
	Status Status

	helper     bool       // contained: Args are the helper's until Start or Prepare
	nsInit     bool       // Start runs the shell under the init shell, not the helper
	wire       wirePolicy // the policy, completed by Prepare
	cloneFlags uintptr    // the namespaces of the helper or the init shell
	tempRoot   string
	tempDir    string
	// threadDone is closed when the thread that started the init shell
	// under Landlock has let go of it (see startInit); nil otherwise.
	threadDone <-chan struct{}
	// live is the pipe by which the helper learns that the host is gone:
	// it gets the read end, the host holds the write end until Close.
	live      [2]*os.File
	closeOnce sync.Once
	closeErr  error

	mu     sync.Mutex // orders Kill before the helper is reaped
	reaped bool

	// What the command shares with its session, and its tree's own
	// resources (see prepareResources); made by Start or Prepare,
	// released by Close.
	sessions *Sessions
	session  string
	state    *sessionState // the session's state, held from Start to Close
	tree     *cgroupNode   // the tree's cgroups; nil where none are made
	parent   *cgroupNode   // the session's (or the host's) group above tree, if any
	before   counters      // parent's counters when the command started
	netFD    int           // the network namespace the tree joins; -1 for none, or the helper's own
	ownNetFD bool          // netFD was made for this command alone and is closed once it runs
	netFile  *os.File      // the helper's copy of netFD, closed once it runs
	// watched is the limit for which Wait's watch killed the tree;
	// limitErr is what Exceeded returns, set by Wait.
	watched  string
	limitErr *LimitError
}

// Command prepares shell to run with args (shell's argv is shell followed
// by args) under p. shell must be an absolute path, and when sandboxed it
// must be inside the system list, p.ReadOnly or a mount, with what it
// needs to load (its dynamic libraries).
//
// Unless p.Unsandboxed is set, Command probes the kernel and fails with a
// [*RefusedError] (wrapping [ErrNoLandlock]) when Landlock is unavailable.
// It also fails on an invalid policy, and when p.Containment asks for a
// PID namespace that cannot be made. It does no other I/O but the
// one-time probes of [Containment] and of what the host needs to start
// commands itself: mount paths are opened when the policy is applied, by
// Start, which then fails if it cannot apply it (for example a missing
// mount), or by the helper, which then exits with status 126 and a
// message on stderr. A shell that does not exist makes the command exit
// with status 127, one that cannot be executed with 126, with a message
// on stderr.
//
// ctx ends the command as [Cmd.Kill] does, the whole tree; callers that
// stop the command themselves can pass a context that is never done.
func Command(ctx context.Context, p Policy, shell string, args ...string) (*Cmd, error) {
	return command(ctx, p, Probe, shell, args...)
}

func command(ctx context.Context, p Policy, probe func() (int, error), shell string, args ...string) (*Cmd, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(shell) {
		return nil, fmt.Errorf("sandbox: shell %q is not an absolute path", shell)
	}
	abi := 0
	if !p.Unsandboxed {
		var err error
		abi, err = probe()
		if abi <= 0 {
			reason := "unknown reason"
			if err != nil {
				reason = err.Error()
			}
			return nil, &RefusedError{Reason: reason}
		}
		abi = capABI(abi, p.LandlockABI)
	}
	mode, flags, err := p.resolveContainment()
	if err != nil {
		return nil, err
	}
	st := newStatus(&p, abi, networkDeniedBy(flags, true), true)
	st.Containment = mode
	flags |= netCloneFlags(&st, flags)
	if !usesHelper {
		c := &Cmd{Cmd: exec.CommandContext(ctx, shell, args...), Status: st, tempRoot: p.TempRoot, netFD: -1}
		return c, nil
	}
	exe := p.Executable
	if exe == "" {
		exe, err = defaultExecutable()
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	w := wirePolicy{
		V:           wireVersion,
		Unsandboxed: p.Unsandboxed,
		Network:     p.network(),
		ABI:         p.LandlockABI,
		Mounts:      append([]Mount(nil), p.Mounts...),
		ReadOnly:    append([]string(nil), p.ReadOnly...),
	}
	// Args[2] is the policy, filled in by Prepare once the temporary
	// directory exists.
	helperArgs := append([]string{HelperArg, "", shell}, args...)
	c := &Cmd{Cmd: exec.CommandContext(ctx, exe, helperArgs...), Status: st, helper: true, wire: w, cloneFlags: flags, tempRoot: p.TempRoot,
		sessions: p.Sessions, session: p.Session, netFD: -1}
	c.nsInit = startsInit(mode, flags, p.Unsandboxed)
	c.Cmd.Cancel = c.Kill
	return c, nil
}

// TempDir returns the command's private temporary directory, its TMPDIR,
// or "" before Start.
func (c *Cmd) TempDir() string { return c.tempDir }

// Start makes the temporary directory, sets TMPDIR, completes the
// command as the package documentation says (the init shell started from
// a restricted thread of the host, or the helper) and starts it. If it
// fails, the temporary directory is removed. When it succeeds under
// Landlock, one OS thread of the host stays parked until the command has
// exited.
func (c *Cmd) Start() error {
	if err := c.prepare(); err != nil {
		return err
	}
	start := c.Cmd.Start
	if c.nsInit {
		start = c.startInit
	}
	err := start()
	// Once it runs, the tree holds its network namespace itself.
	c.releaseNetFD()
	if c.netFile != nil {
		c.netFile.Close()
		c.netFile = nil
	}
	if err != nil {
		c.Close()
		return err
	}
	return nil
}

// Prepare prepares the command to run under the helper, which confines
// itself, so that a caller that must start the embedded exec.Cmd itself
// can: it creates the temporary directory (mode 0700, under
// Config.TempRoot), sets TMPDIR to it in the command's environment (Env,
// or the process's environment when Env is nil), encodes the policy, adds
// the helper's end of the host pipe to ExtraFiles and completes
// SysProcAttr. Such a caller still stops the command with Kill and waits
// for it with Cmd's Wait, or calls Close after it ends. The helper's
// re-exec makes such a start some milliseconds slower than Start's.
func (c *Cmd) Prepare() error {
	// Only Start can confine the init shell; the helper confines itself.
	c.nsInit = false
	return c.prepare()
}

func (c *Cmd) prepare() error {
	if c.tempDir != "" {
		return errors.New("sandbox: already started")
	}
	dir, err := makeTempDir(c.tempRoot)
	if err != nil {
		return fmt.Errorf("sandbox: temporary directory: %w", err)
	}
	c.tempDir = dir
	if c.helper {
		if err := c.prepareResources(); err != nil {
			c.Close()
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	if c.nsInit {
		c.prepareInit()
	} else if c.helper {
		r, w, err := os.Pipe()
		if err != nil {
			c.Close()
			return fmt.Errorf("sandbox: %w", err)
		}
		c.live = [2]*os.File{r, w}
		c.ExtraFiles = append(c.ExtraFiles, r)
		wp := c.wire
		wp.TempDir = dir
		wp.LiveFD = 2 + len(c.ExtraFiles)
		wp.TTY = c.onTerminal()
		wp.NetBy = c.Status.NetworkDeniedBy
		wp.Cgroups = c.treeDirs()
		wp.Rlimits = c.rlimits()
		if c.netFD >= 0 {
			f, err := dupFile(c.netFD, "netns")
			if err != nil {
				c.Close()
				return fmt.Errorf("sandbox: %w", err)
			}
			c.netFile = f
			c.ExtraFiles = append(c.ExtraFiles, f)
			wp.NetFD = 2 + len(c.ExtraFiles)
		}
		data, err := json.Marshal(wp)
		if err != nil {
			c.Close()
			return fmt.Errorf("sandbox: encoding the policy: %w", err)
		}
		c.Args[2] = string(data)
		c.contain()
	}
	c.Env = setEnv(c.Environ(), "TMPDIR", dir)
	return nil
}

// Kill ends the command and everything it started, whichever process
// group or session they are in: in a PID namespace it kills the
// namespace's init, whose death makes the kernel kill the rest; as a
// subreaper it kills the helper's descendants (repeatedly, until none is
// left or a few seconds have passed) and then the helper. Off Linux it
// kills the shell only.
// Kill returns [os.ErrProcessDone] once the command has been waited for,
// and is safe to call from any goroutine, also while Wait runs.
func (c *Cmd) Kill() error {
	if c.Process == nil {
		return errors.New("sandbox: not started")
	}
	if !c.helper {
		return c.Process.Kill()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reaped {
		return os.ErrProcessDone
	}
	return c.killHelperTree()
}

// Wait waits for the command as [exec.Cmd.Wait] does, then removes the
// temporary directory. It returns the command's error only; [Cmd.Close]
// reports whether the removal failed.
func (c *Cmd) Wait() error {
	if c.helper && c.Process != nil {
		if c.needsWatch() {
			c.watch(c.Process.Pid)
		}
		// Kill must not look for the descendants of a pid that may be
		// reused: mark the helper reaped under the lock, while it is
		// still a zombie.
		if c.threadDone != nil {
			<-c.threadDone // the thread has seen it exit
		} else {
			waitExited(c.Process.Pid)
		}
		c.mu.Lock()
		c.reaped = true
		c.mu.Unlock()
	}
	err := c.Cmd.Wait()
	c.limitErr = c.exceeded()
	c.Close()
	return err
}

// Exceeded returns the limit the command's tree ran into ([LimitError]:
// which, whose and what happened), or nil; Wait sets it. A command may
// fail for its own reasons after running into a limit (a program that
// reports EFBIG and exits 1): the exit status is the command's, Exceeded
// says why.
func (c *Cmd) Exceeded() *LimitError { return c.limitErr }

// Run starts the command and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the command and returns its standard output. Stdout must
// be nil.
func (c *Cmd) Output() ([]byte, error) {
	if c.Stdout != nil {
		return nil, errors.New("sandbox: Stdout already set")
	}
	var out bytes.Buffer
	c.Stdout = &out
	err := c.Run()
	return out.Bytes(), err
}

// CombinedOutput runs the command and returns its standard output and
// standard error together. Stdout and Stderr must be nil.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	if c.Stdout != nil || c.Stderr != nil {
		return nil, errors.New("sandbox: Stdout or Stderr already set")
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.Bytes(), err
}

// Close removes the temporary directory and everything in it, even
// read-only subdirectories, closes the host's ends of the helper's pipe
// and returns the first removal error. Wait and a failed Start call it;
// call it yourself only for a Cmd that was started but will never be
// waited for. It may be called more than once and returns the same
// result; it does not stop the command, though a helper whose pipe is
// closed takes the host for dead and ends the tree. (Without Wait, the
// thread a command was started from under Landlock ends when the
// command has exited.)
func (c *Cmd) Close() error {
	if c.tempDir == "" {
		return nil
	}
	c.closeOnce.Do(func() {
		for _, f := range c.live {
			if f != nil {
				f.Close()
			}
		}
		if c.netFile != nil {
			c.netFile.Close()
		}
		c.closeErr = errors.Join(removeAll(c.tempDir), c.closeResources())
	})
	return c.closeErr
}

// removeAll removes dir, first making every directory in it writable and
// searchable so that a command's chmod cannot leave files behind.
func removeAll(dir string) error {
	// Most commands leave the directory empty.
	if err := syscall.Rmdir(dir); err == nil {
		return nil
	}
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sandbox: removing the temporary directory: %w", err)
	}
	return nil
}

// setEnv returns env with key set to value, replacing every earlier entry.
func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}
