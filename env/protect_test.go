package env_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/env"
)

// A client's path may not be, lie under or contain the kernel's file
// systems or the host's state, through symbolic links too.
func TestProtected(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "home", ".local", "state", "weft")
	mkdirs(t, state, filepath.Join(dir, "home", "proj"), filepath.Join(dir, "other"))
	writeFile(t, filepath.Join(state, "token"), "t")
	for name, target := range map[string]string{"p": "/proc", "s": state, "h": filepath.Join(dir, "home"), "ok": filepath.Join(dir, "other")} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	p := env.NewProtected(state, "relative/ignored")
	for _, path := range []string{
		"/proc", "/proc/1/environ", "/proc/self/root", "/sys", "/sys/kernel", "/dev", "/dev/null", "/", "/proc/../proc",
		filepath.Join(dir, "p"), filepath.Join(dir, "p", "self", "environ"), filepath.Join(dir, "p", "no", "such"),
		state, filepath.Join(state, "token"), filepath.Join(state, "scratch", "ses_x"), filepath.Join(dir, "home"),
		filepath.Join(dir, "s"), filepath.Join(dir, "h"), dir,
	} {
		if real, err := p.Check(path); !errors.Is(err, env.ErrProtected) {
			t.Errorf("Check(%s) = %q, %v; want ErrProtected", path, real, err)
		}
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "home", "proj"):       filepath.Join(dir, "home", "proj"),
		filepath.Join(dir, "ok"):                 filepath.Join(dir, "other"),
		filepath.Join(dir, "ok", "missing", "x"): filepath.Join(dir, "other", "missing", "x"),
	} {
		if real, err := p.Check(path); err != nil || real != want {
			t.Errorf("Check(%s) = %q, %v; want %s", path, real, err, want)
		}
	}
	_, err = p.Check(filepath.Join(dir, "p"))
	if err == nil || !strings.Contains(err.Error(), "leads to /proc") {
		t.Errorf("the error does not say where the link leads: %v", err)
	}
	if _, err := p.Check("rel/path"); err == nil || errors.Is(err, env.ErrProtected) {
		t.Errorf("a relative path: %v", err)
	}
	var none *env.Protected
	if _, err := none.Check("/proc/self"); !errors.Is(err, env.ErrProtected) {
		t.Errorf("a nil Protected lets /proc through: %v", err)
	}
}
