// Package seccomp assembles and installs small seccomp-BPF filters: the
// sandbox's (sockets a command may not make, signals it may not send) and
// the test environment's (kernel features a child test binary lacks).
//
// A filter is a [Program]: a list of classic BPF instructions over struct
// seccomp_data, built with [Stmt] and [Jump] and the offsets below, and
// installed with [Install] on the calling thread, which passes it on to
// the processes it forks. Filters are checked against [Arch], the audit
// architecture of this build; where the package does not know the
// architecture's system call conventions, Arch returns 0 and callers do
// without a filter.
package seccomp
