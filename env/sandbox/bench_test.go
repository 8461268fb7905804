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
// shell, reaping, removal. With Landlock the network is denied: each
// command gets a network namespace of its own, or in a session the
// session's, prepared once. Modes this machine lacks are skipped (failed
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
	// A session's commands: its network namespace prepared once and
	// joined by each, and each tree in cgroups (processes, memory)
	// beneath the session's and the host's, with the default limits.
	for _, containment := range []string{sandbox.ContainmentPIDNamespace, sandbox.ContainmentSubreaper} {
		b.Run(containment+"/landlock+session+limits", func(b *testing.B) {
			if containment == sandbox.ContainmentPIDNamespace {
				testenv.PIDNamespace(b)
			}
			testenv.Landlock(b, 1)
			testenv.NetNamespace(b)
			testenv.Cgroups(b)
			cmd, ses, host := sandbox.DefaultLimits(sandbox.MachineMemory())
			s, err := sandbox.NewSessions(sandbox.SessionsConfig{Session: ses, Host: host})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			p := l.policy(sandbox.Config{Containment: containment, TempRoot: b.TempDir(), Limits: cmd, Sessions: s})
			p.Session = "ses_bench"
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
