package sandbox_test

import (
	"os/exec"
	"testing"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/testenv"
)

// BenchmarkStart measures start to exit of sh -c true: started with
// os/exec ("plain"), and through Command in each containment mode,
// unsandboxed and under Landlock: temporary directory; in a PID namespace
// without a user namespace, the ruleset, a restricted disposable thread
// of the host and the init shell's exec, else the helper's re-exec (of
// the test binary) and its own restricted thread; fork and exec of the
// shell, reaping, removal. Modes this machine lacks are skipped (failed
// under CI).
func BenchmarkStart(b *testing.B) {
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	l := newLayout(b)
	for _, containment := range []string{sandbox.ContainmentPIDNamespace, sandbox.ContainmentSubreaper} {
		for _, landlock := range []bool{false, true} {
			name := containment + "/unsandboxed"
			if landlock {
				name = containment + "/landlock"
			}
			b.Run(name, func(b *testing.B) {
				if containment == sandbox.ContainmentPIDNamespace {
					testenv.PIDNamespace(b)
				}
				if landlock {
					testenv.Landlock(b, 1)
				}
				p := l.policy(sandbox.Config{Unsandboxed: !landlock, Containment: containment, TempRoot: b.TempDir()})
				b.ReportAllocs()
				for b.Loop() {
					c, err := sandbox.Command(b.Context(), p, "/bin/sh", "-c", "true")
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
