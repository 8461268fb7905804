package sandbox_test

import (
	"os/exec"
	"testing"

	"weft.dev/weft/env/sandbox"
)

// BenchmarkStartPlain starts /bin/true with os/exec and waits for it.
func BenchmarkStartPlain(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStartSandboxed starts /bin/true through Command: temporary
// directory, re-exec of the (test) binary, Landlock, exec, removal. Where
// the kernel has no Landlock it measures the unsandboxed path instead and
// says so.
func BenchmarkStartSandboxed(b *testing.B) {
	l := newLayout(b)
	cfg := sandbox.Config{}
	if abi, err := sandbox.Probe(); abi == 0 {
		b.Logf("no Landlock (%v): measuring the unsandboxed path", err)
		cfg.Unsandboxed = true
	}
	p := l.policy(cfg)
	b.ReportAllocs()
	for b.Loop() {
		c, err := sandbox.Command(b.Context(), p, "/bin/true")
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
