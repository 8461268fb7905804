package env_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/testenv"
)

// secret is placed in files outside every mount; no read through a
// Binding may ever return it.
const secret = "WEFT-SECRET-d1b7c0ffee"

// fixture builds:
//
//	dir/outside/secret.txt, dir/outside/sub/secret.txt   the secret
//	dir/secret.txt                                        the secret
//	dir/work/  (rw, default)  with links and special files listed below
//	dir/docs/  (ro)
type fixture struct {
	dir, work, docs, outside string
	b                        *env.Binding
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{
		dir:     dir,
		work:    filepath.Join(dir, "work"),
		docs:    filepath.Join(dir, "docs"),
		outside: filepath.Join(dir, "outside"),
	}
	writeFile(t, filepath.Join(f.outside, "secret.txt"), secret)
	writeFile(t, filepath.Join(f.outside, "sub", "secret.txt"), secret)
	writeFile(t, filepath.Join(dir, "secret.txt"), secret)
	writeFile(t, filepath.Join(f.work, "a.txt"), "alpha")
	writeFile(t, filepath.Join(f.work, "dir", "b.txt"), "beta")
	writeFile(t, filepath.Join(f.docs, "r.txt"), "docs")
	links := map[string]string{
		"link_root":        "/",
		"link_etc":         "/etc",
		"link_abs_secret":  filepath.Join(f.outside, "secret.txt"),
		"link_abs_work":    f.work, // absolute, even though it points inside
		"link_up":          "../outside",
		"link_up_secret":   "../outside/secret.txt",
		"link_dotdot":      "..",
		"link_self_up":     "./dir/../../outside",
		"chain1":           "chain2",
		"chain2":           "chain3",
		"chain3":           "../outside/secret.txt",
		"chaindir1":        "chaindir2",
		"chaindir2":        "dir/../..",
		"dir/deep":         "../../outside/secret.txt",
		"dir/deepdir":      "../../outside",
		"dir/inside":       "../a.txt",
		"link_proc":        "/proc/self/root",
		"link_proc_rel":    "../../../../../../../../../../proc/self/root",
		"link_devnull":     "/dev/null",
		"link_to_docs":     "../docs",
		"loop1":            "loop2",
		"loop2":            "loop1",
		"link_in_dir":      "dir",
		"dir/link_to_work": "..",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(f.work, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(f.work, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A character device (1,3 is /dev/null); needs privileges.
	_ = syscall.Mknod(filepath.Join(f.work, "chardev"), syscall.S_IFCHR|0o666, 1<<8|3)
	// A hard link to a file outside: created by the host, it is a file in
	// the tree as far as the kernel is concerned, and readable. It holds no
	// secret so the invariant below stays simple; TestHardLink covers it.
	writeFile(t, filepath.Join(f.outside, "hard.txt"), "hard-linked")
	_ = os.Link(filepath.Join(f.outside, "hard.txt"), filepath.Join(f.work, "hard"))

	f.b = mustBinding(t,
		event.Mount{ID: "work", Kind: event.KindLocal, Path: f.work, Mode: "rw", Default: true},
		event.Mount{ID: "docs", Kind: event.KindLocal, Path: f.docs, Mode: "ro"},
	)
	return f
}

// probe tries every read helper on p and reports content that leaked.
func probe(b *env.Binding, p string) (leak string) {
	check := func(what string, data []byte) {
		if bytes.Contains(data, []byte(secret)) && leak == "" {
			leak = what
		}
	}
	rp, err := b.Resolve(p, env.Read)
	if err != nil {
		return ""
	}
	data, _ := rp.ReadFile(1 << 20)
	check("ReadFile", data)
	if f, err := rp.Open(); err == nil {
		data, _ := io.ReadAll(io.LimitReader(f, 1<<20))
		f.Close()
		check("Open", data)
	}
	if ents, _, err := rp.ReadDir(100); err == nil {
		for _, e := range ents {
			if c, err := rp.Join(e.Name()); err == nil {
				data, _ := c.ReadFile(1 << 20)
				check("ReadDir+ReadFile", data)
			}
		}
	}
	return leak
}

// escapeCorpus returns paths that try to reach outside the mounts.
func escapeCorpus(f *fixture) []string {
	bases := []string{
		"..",
		"../secret.txt",
		"../outside/secret.txt",
		"../../secret.txt",
		"../../../../../../../../etc/passwd",
		"./../secret.txt",
		"dir/../../secret.txt",
		"dir/../../outside/secret.txt",
		"dir/./../../outside/sub/secret.txt",
		"a/b/c/../../../../secret.txt",
		".../secret.txt",
		"..%2fsecret.txt",
		"..\\secret.txt",
		"dir/..\\..\\secret.txt",
		"..;/secret.txt",
		".. /secret.txt",
		"link_root/" + strings.TrimPrefix(filepath.Join(f.outside, "secret.txt"), "/"),
		"link_root",
		"link_etc/passwd",
		"link_abs_secret",
		"link_abs_work/a.txt",
		"link_up/secret.txt",
		"link_up/sub/secret.txt",
		"link_up",
		"link_up_secret",
		"link_dotdot/secret.txt",
		"link_dotdot/outside/secret.txt",
		"link_self_up/secret.txt",
		"chain1",
		"chaindir1/secret.txt",
		"chaindir1/outside/secret.txt",
		"dir/deep",
		"dir/deepdir/secret.txt",
		"dir/deepdir",
		"link_proc/" + strings.TrimPrefix(filepath.Join(f.outside, "secret.txt"), "/"),
		"link_proc_rel/" + strings.TrimPrefix(filepath.Join(f.outside, "secret.txt"), "/"),
		"link_devnull",
		"loop1",
		"link_in_dir/../../secret.txt",
		"dir/link_to_work/../secret.txt",
		"dir/link_to_work/link_up/secret.txt",
		"link_to_docs/../outside/secret.txt",
		"fifo",
		"chardev",
		"proc/self/root" + filepath.Join(f.outside, "secret.txt"),
		strings.Repeat("../", 200) + "secret.txt",
		strings.Repeat("dir/../", 700) + "../secret.txt",
		strings.Repeat("x/", 2100) + "secret.txt",
		"secret.txt\x00",
		"\x00../secret.txt",
	}
	prefixes := []string{"", "./", "/environment/work/", "/environment/docs/", "//environment/work//", "/environment/./work/./"}
	var out []string
	for _, p := range prefixes {
		for _, b := range bases {
			out = append(out, p+b)
		}
	}
	abs := []string{
		filepath.Join(f.outside, "secret.txt"),
		filepath.Join(f.dir, "secret.txt"),
		filepath.Join(f.work, "..", "secret.txt"),
		f.work + "/a.txt",
		"/proc/self/root" + filepath.Join(f.outside, "secret.txt"),
		"/proc/self/cwd/secret.txt",
		"/dev/null",
		"/etc/passwd",
		"/environment/../" + strings.TrimPrefix(filepath.Join(f.outside, "secret.txt"), "/"),
		"/environment/..",
		"/environment/work/../../" + strings.TrimPrefix(filepath.Join(f.outside, "secret.txt"), "/"),
		"/environment/work/../docs/../../secret.txt",
		"/environment/work/..",
		"/environment/nope/secret.txt",
		"/environment/" + strings.TrimPrefix(f.outside, "/") + "/secret.txt",
		"/environment",
		"/../environment/work/a.txt/../../../secret.txt",
		"/ environment/work",
		"\\environment\\work\\..\\..\\secret.txt",
		"~/secret.txt",
		"file://" + filepath.Join(f.outside, "secret.txt"),
	}
	return append(out, abs...)
}

// TestEscapeCorpus checks that no path in the corpus reads the secret,
// through any read helper.
func TestEscapeCorpus(t *testing.T) {
	f := newFixture(t)
	corpus := escapeCorpus(f)
	if len(corpus) < 100 {
		t.Fatalf("corpus has %d cases", len(corpus))
	}
	for _, p := range corpus {
		if leak := probe(f.b, p); leak != "" {
			t.Errorf("%q: secret leaked through %s", p, leak)
		}
	}
	t.Logf("%d paths, no leak", len(corpus))
}

// TestEscapeWrites checks that no write through the corpus lands outside
// the mounts or in the ro mount.
func TestEscapeWrites(t *testing.T) {
	f := newFixture(t)
	snapshot := func() string {
		var sb strings.Builder
		for _, d := range []string{f.outside, f.docs} {
			filepath.WalkDir(d, func(p string, de fs.DirEntry, err error) error {
				fmt.Fprintf(&sb, "%s\n", p)
				if de != nil && de.Type().IsRegular() {
					data, _ := os.ReadFile(p)
					fmt.Fprintf(&sb, "%q\n", data)
				}
				return nil
			})
		}
		data, _ := os.ReadFile(filepath.Join(f.dir, "secret.txt"))
		sb.Write(data)
		entries, _ := os.ReadDir(f.dir)
		for _, e := range entries {
			sb.WriteString(e.Name() + "\n")
		}
		return sb.String()
	}
	before := snapshot()
	for _, p := range escapeCorpus(f) {
		if strings.HasSuffix(p, "fifo") || strings.HasSuffix(p, "chardev") {
			continue // covered by TestSpecialFiles
		}
		rp, err := f.b.Resolve(p, env.Write)
		if err != nil {
			continue
		}
		_ = rp.WriteFile([]byte("PWNED"))
		_ = rp.MkdirAll()
		if c, err := rp.Join("new.txt"); err == nil {
			_ = c.WriteFile([]byte("PWNED"))
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("outside changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestSymlinkOutIsErrOutside(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"link_root/etc/passwd", "link_up/secret.txt", "chain1", "dir/deep", "link_devnull", "link_proc"} {
		_, err := f.b.ReadFile(p, 0)
		var e *env.Error
		if !errors.Is(err, env.ErrOutside) || !errors.As(err, &e) || e.MountID != "work" {
			t.Errorf("%s: %v, want ErrOutside", p, err)
		}
		if err != nil && strings.Contains(err.Error(), f.dir) {
			t.Errorf("%s: error names a host path: %v", p, err)
		}
	}
	// A symlink that stays inside is followed.
	if got, err := f.b.ReadFile("dir/inside", 0); err != nil || string(got) != "alpha" {
		t.Errorf("inside link: %q, %v", got, err)
	}
	if got, err := f.b.ReadFile("link_in_dir/b.txt", 0); err != nil || string(got) != "beta" {
		t.Errorf("inside dir link: %q, %v", got, err)
	}
	// HostDir refuses a directory link that leads out.
	if p, err := f.b.Resolve("link_up", env.Read); err == nil {
		if _, err := p.HostDir(); !errors.Is(err, env.ErrOutside) {
			t.Errorf("HostDir(link_up): %v", err)
		}
	}
}

func TestSpecialFiles(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("unix", filepath.Join(f.work, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()

	names := []string{"fifo", "sock"}
	if _, err := os.Lstat(filepath.Join(f.work, "chardev")); err == nil {
		names = append(names, "chardev")
	} else {
		t.Log("no mknod privilege; character device not tested")
	}
	for _, n := range names {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := f.b.ReadFile(n, 0); !errors.Is(err, env.ErrNotRegular) {
				t.Errorf("read %s: %v", n, err)
			}
			p, _ := f.b.Resolve(n, env.Read)
			if fl, err := p.Open(); !errors.Is(err, env.ErrNotRegular) {
				if fl != nil {
					fl.Close()
				}
				t.Errorf("open %s: %v", n, err)
			}
			if err := f.b.WriteFile(n, []byte("x")); !errors.Is(err, env.ErrNotRegular) {
				t.Errorf("write %s: %v", n, err)
			}
			if fi, err := f.b.Stat(n); err != nil || fi.Mode().IsRegular() {
				t.Errorf("stat %s: %v, %v", n, fi, err)
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: blocked", n)
		}
	}
}

// TestHardLink documents a limit: a hard link made on the host inside a
// mount to a file outside it is, to the kernel, a file in the mount. The
// agent cannot make one through a Binding; weft relies on the host not
// placing them.
func TestHardLink(t *testing.T) {
	f := newFixture(t)
	if _, err := os.Lstat(filepath.Join(f.work, "hard")); err != nil {
		testenv.Missing(t, "hard links unsupported here: %v", err)
	}
	got, err := f.b.ReadFile("hard", 0)
	if err != nil || string(got) != "hard-linked" {
		t.Errorf("hard link: %q, %v", got, err)
	}
}

// TestSymlinkSwapRace swaps a path between a regular file and a symbolic
// link to the secret, and a directory and a link to the outside directory,
// while readers resolve and read it. No read may return the secret.
func TestSymlinkSwapRace(t *testing.T) {
	f := newFixture(t)
	writeFile(t, filepath.Join(f.work, "safedir", "secret.txt"), "safe")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	swap := func(name string, mkSafe func(string) error, target string) {
		defer wg.Done()
		dst := filepath.Join(f.work, name)
		tmpSafe, tmpLink := dst+".safe", dst+".link"
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				os.RemoveAll(tmpSafe)
				if err := mkSafe(tmpSafe); err != nil {
					continue
				}
				os.RemoveAll(dst)
				os.Rename(tmpSafe, dst)
			} else {
				os.Remove(tmpLink)
				if err := os.Symlink(target, tmpLink); err != nil {
					continue
				}
				os.RemoveAll(dst)
				os.Rename(tmpLink, dst)
			}
		}
	}
	wg.Add(2)
	go swap("swap", func(p string) error { return os.WriteFile(p, []byte("safe"), 0o644) }, "../outside/secret.txt")
	go swap("swapdir", func(p string) error {
		if err := os.Mkdir(p, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(p, "secret.txt"), []byte("safe"), 0o644)
	}, "../outside")

	var leaks, reads, oks int
	var mu sync.Mutex
	var rg sync.WaitGroup
	deadline := time.Now().Add(500 * time.Millisecond)
	for range 4 {
		rg.Add(1)
		go func() {
			defer rg.Done()
			for time.Now().Before(deadline) {
				for _, p := range []string{"swap", "swapdir/secret.txt", "/environment/work/swapdir/secret.txt"} {
					data, err := f.b.ReadFile(p, 1<<10)
					mu.Lock()
					reads++
					if err == nil {
						oks++
					}
					if bytes.Contains(data, []byte(secret)) {
						leaks++
					}
					mu.Unlock()
				}
			}
		}()
	}
	rg.Wait()
	close(stop)
	wg.Wait()
	if leaks != 0 {
		t.Fatalf("%d of %d reads leaked the secret", leaks, reads)
	}
	t.Logf("%d reads (%d succeeded), no leak", reads, oks)
}

func FuzzResolve(f *testing.F) {
	fx := newFixture(f)
	for _, p := range escapeCorpus(fx) {
		f.Add(p)
	}
	f.Add("a.txt")
	f.Add("/environment/docs/r.txt")
	f.Fuzz(func(t *testing.T, p string) {
		if leak := probe(fx.b, p); leak != "" {
			t.Fatalf("%q: secret leaked through %s", p, leak)
		}
		if rp, err := fx.b.Resolve(p, env.Read); err == nil {
			if !strings.HasPrefix(rp.String(), env.Prefix+"/") || strings.Contains(rp.Rel(), "..") && cleanHasDotDot(rp.Rel()) {
				t.Fatalf("%q resolved to %q (rel %q)", p, rp, rp.Rel())
			}
		}
	})
}

func cleanHasDotDot(rel string) bool {
	for c := range strings.SplitSeq(rel, "/") {
		if c == ".." {
			return true
		}
	}
	return false
}

func BenchmarkResolve(b *testing.B) {
	f := newFixture(b)
	for _, p := range []string{"dir/b.txt", "/environment/work/dir/b.txt", "/environment/docs/r.txt"} {
		b.Run(strings.ReplaceAll(p, "/", "_"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.b.Resolve(p, env.Read); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("resolve+read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.b.ReadFile("dir/b.txt", 1<<10); err != nil {
				b.Fatal(err)
			}
		}
	})
}
