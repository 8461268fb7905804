package testenv_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/testenv"
)

func TestMain(m *testing.M) {
	if sandbox.IsHelper(os.Args) {
		sandbox.Main(os.Args)
	}
	goleak.VerifyTestMain(m)
}

func TestCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "FALSE": false, "1": true, "true": true, "yes": true} {
		t.Setenv("CI", v)
		if got := testenv.CI(); got != want {
			t.Errorf("CI=%q: CI() = %v", v, got)
		}
	}
}

func TestLackString(t *testing.T) {
	if s := (testenv.NoLandlock | testenv.NoDACOverride).String(); s != "NoLandlock|NoDACOverride" {
		t.Errorf("String = %q", s)
	}
}

// TestWithoutLandlock: the child, and the sandbox helper it starts, see
// no Landlock; the parent keeps it.
func TestWithoutLandlock(t *testing.T) {
	if testenv.Without(t, testenv.NoLandlock) {
		if abi := testenv.Landlock(t, 1); abi == 0 {
			t.Errorf("the parent lost Landlock")
		}
		return
	}
	abi, err := sandbox.Probe()
	if abi != 0 || !strings.Contains(err.Error(), "built without Landlock") {
		t.Fatalf("Probe = %d, %v", abi, err)
	}
	_, err = sandbox.Command(t.Context(), sandbox.Policy{}, "/bin/true")
	if !errors.Is(err, sandbox.ErrNoLandlock) {
		t.Fatalf("Command = %v, want a refusal", err)
	}
}

// TestWithoutNamespaces: the child cannot make a PID namespace and falls
// back to the subreaper; the parent still can.
func TestWithoutNamespaces(t *testing.T) {
	if testenv.Without(t, testenv.NoNamespaces) {
		testenv.PIDNamespace(t) // the parent still can
		return
	}
	mode, err := sandbox.Containment()
	if mode != sandbox.ContainmentSubreaper || !errors.Is(err, syscall.EPERM) {
		t.Fatalf("Containment = %s, %v", mode, err)
	}
}

// TestWithoutDACOverride: in the child even root cannot read a file of
// mode 0200; the parent, as root, still can.
func TestWithoutDACOverride(t *testing.T) {
	name := filepath.Join(os.TempDir(), "weft-testenv-"+strings.ReplaceAll(t.Name(), "/", "-"))
	if testenv.Without(t, testenv.NoDACOverride) {
		return
	}
	if err := os.WriteFile(name, []byte("x"), 0o200); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(name)
	if _, err := os.ReadFile(name); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("read a file of mode 0200: %v", err)
	}
}

// TestStartWithout: a program started without CAP_DAC_OVERRIDE cannot
// read a file of mode 0200 that this process, root, can.
func TestStartWithout(t *testing.T) {
	testenv.Root(t, "only root reads a file of mode 0200")
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, []byte("x"), 0o200); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.Command(t, "cat"), name)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := testenv.StartWithout(t, cmd, testenv.NoDACOverride); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(out.String(), "Permission denied") {
		t.Errorf("cat without CAP_DAC_OVERRIDE: %v, %q", err, out.String())
	}
	if b, err := os.ReadFile(name); err != nil || string(b) != "x" {
		t.Errorf("this process lost CAP_DAC_OVERRIDE: %q, %v", b, err)
	}
}
