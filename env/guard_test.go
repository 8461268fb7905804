package env_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

// denyGuard refuses every target one of whose paths (as named, or where
// it really is) has a component in deny. It records what it was asked.
type denyGuard struct {
	deny []string

	mu    sync.Mutex
	asked []string
}

func (g *denyGuard) Allow(t env.Target) error {
	all := append([]*env.Path{t.Path}, t.Real...)
	var names []string
	for _, p := range all {
		names = append(names, p.String())
	}
	g.mu.Lock()
	g.asked = append(g.asked, strings.Join(names, " "))
	g.mu.Unlock()
	for _, p := range all {
		for _, c := range strings.Split(p.String(), "/") {
			if slices.Contains(g.deny, c) {
				return errors.New("no " + c)
			}
		}
	}
	return nil
}

// linkTree builds a mount holding .env and secrets/key (the secret),
// vault/ (a mount of its own too), harmless files, and links to them.
func linkTree(t *testing.T) (dir string, b *env.Binding) {
	t.Helper()
	dir = t.TempDir()
	writeFile(t, filepath.Join(dir, ".env"), secret)
	writeFile(t, filepath.Join(dir, "secrets", "key"), secret)
	writeFile(t, filepath.Join(dir, "vault", "key"), secret)
	writeFile(t, filepath.Join(dir, "plain.txt"), "plain")
	writeFile(t, filepath.Join(dir, "sub", "plain.txt"), "plain")
	for name, target := range map[string]string{
		"notes.txt":     ".env",
		"d":             "secrets",
		"chain1":        "chain2",
		"chain2":        "sub/../.env",
		"sub/up":        "..",
		"sub/toplain":   "../plain.txt",
		"tovault":       "vault/key",
		"dangling.txt":  "made/.env",
		"dangling2.txt": ".env2",
		"abs":           filepath.Join(dir, ".env"),
		"loop1":         "loop2",
		"loop2":         "loop1",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	b = mustBinding(t,
		event.Mount{ID: "work", Kind: event.KindLocal, Path: dir, Mode: "rw", Default: true},
		event.Mount{ID: "vault", Kind: event.KindLocal, Path: filepath.Join(dir, "vault"), Mode: "ro"},
	)
	return dir, b
}

// EvalSymlinks follows links as os.Root does, keeps a missing tail as
// written (where a write would create it), and refuses what leaves the
// mount.
func TestEvalSymlinks(t *testing.T) {
	_, b := linkTree(t)
	tests := []struct {
		path, want string
		err        error
	}{
		{"plain.txt", "/environment/work/plain.txt", nil},
		{"notes.txt", "/environment/work/.env", nil},
		{"d/key", "/environment/work/secrets/key", nil},
		{"chain1", "/environment/work/.env", nil},
		{"sub/up/secrets/key", "/environment/work/secrets/key", nil},
		{"sub/up/sub/up/notes.txt", "/environment/work/.env", nil},
		{"sub/toplain", "/environment/work/plain.txt", nil},
		{"tovault", "/environment/work/vault/key", nil},
		{"dangling.txt", "/environment/work/made/.env", nil},
		{"new/dir/file", "/environment/work/new/dir/file", nil},
		{"d/new", "/environment/work/secrets/new", nil},
		{".", "/environment/work", nil},
		{"abs", "", env.ErrOutside},
		{"loop1", "", syscall.ELOOP},
	}
	for _, tc := range tests {
		p, err := b.Resolve(tc.path, env.Write)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.EvalSymlinks()
		switch {
		case tc.err != nil:
			if !errors.Is(err, tc.err) {
				t.Errorf("EvalSymlinks(%s) = %v, %v; want %v", tc.path, got, err, tc.err)
			}
		case err != nil || got.String() != tc.want || got.Access() != env.Write:
			t.Errorf("EvalSymlinks(%s) = %v, %v; want %s", tc.path, got, err, tc.want)
		}
	}
}

// Locate names every mount the target lies in.
func TestLocate(t *testing.T) {
	_, b := linkTree(t)
	got, err := b.Locate("tovault")
	if err != nil || !slices.Equal(got, []string{"/environment/work/vault/key", "/environment/vault/key"}) {
		t.Fatalf("Locate(tovault) = %v, %v", got, err)
	}
	if got, err := b.Locate("/environment/work/sub/up/notes.txt"); err != nil || !slices.Equal(got, []string{"/environment/work/.env"}) {
		t.Fatalf("Locate through links = %v, %v", got, err)
	}
	if _, err := b.Locate("../x"); !errors.Is(err, env.ErrOutside) {
		t.Fatalf("Locate(../x) = %v", err)
	}
}

// A guarded binding asks about what it really opens: a link to .env, a
// directory link, a link into another mount; a write through a link is
// refused before anything changes, and a write through a dangling link
// creates nothing. Refusals wrap ErrDenied and name the path as given.
func TestGuardSeesWhatOpens(t *testing.T) {
	dir, b := linkTree(t)
	g := &denyGuard{deny: []string{".env", "secrets", "vault"}}
	gb := b.WithGuard(g)
	for _, p := range []string{"notes.txt", "chain1", "d/key", "sub/up/.env", "tovault", ".env", "/environment/vault/key"} {
		rp, err := gb.Resolve(p, env.Read)
		if err != nil {
			t.Fatal(err)
		}
		if data, err := rp.ReadFile(0); !errors.Is(err, env.ErrDenied) || len(data) > 0 || strings.Contains(err.Error(), dir) {
			t.Errorf("ReadFile(%s) = %q, %v", p, data, err)
		}
		if f, err := rp.Open(); !errors.Is(err, env.ErrDenied) {
			f.Close()
			t.Errorf("Open(%s) = %v", p, err)
		}
	}
	// The unguarded binding still reads them: the guard is the view's.
	if data, err := b.ReadFile("notes.txt", 0); err != nil || string(data) != secret {
		t.Fatalf("unguarded read: %q, %v", data, err)
	}
	for _, p := range []string{"notes.txt", "chain1", "dangling.txt", "d/new.txt"} {
		err := gb.WriteFile(p, []byte("overwritten"))
		if !errors.Is(err, env.ErrDenied) {
			t.Errorf("WriteFile(%s) = %v", p, err)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(dir, ".env")); string(data) != secret {
		t.Errorf(".env changed: %q", data)
	}
	for _, p := range []string{"made", "secrets/new.txt"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("a refused write created %s", p)
		}
	}
	// Allowed targets still work, through links too.
	if data, err := gb.ReadFile("sub/toplain", 0); err != nil || string(data) != "plain" {
		t.Errorf("read of an allowed link: %q, %v", data, err)
	}
	if err := gb.WriteFile("dangling2.txt", []byte("new")); err != nil {
		t.Errorf("write through an allowed dangling link: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, ".env2")); string(data) != "new" {
		t.Errorf("the dangling link's target: %q", data)
	}
	// The guard saw the file it opened in both mounts it lies in.
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.ContainsFunc(g.asked, func(s string) bool {
		return s == "/environment/work/tovault /environment/work/vault/key /environment/vault/key"
	}) {
		t.Errorf("the guard was asked %q", g.asked)
	}
	if err := gb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadFile("plain.txt", 0); err != nil {
		t.Fatalf("closing the view closed the binding: %v", err)
	}
}

// Listings leave out and count what the guard refuses; a walk reports it
// with ErrDenied and does not enter a refused directory.
func TestGuardedListings(t *testing.T) {
	_, b := linkTree(t)
	gb := b.WithGuard(&denyGuard{deny: []string{".env", "secrets", "vault"}})
	root, err := gb.Resolve(".", env.Read)
	if err != nil {
		t.Fatal(err)
	}
	ents, hidden, err := root.ReadDir(0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	// .env, notes.txt, chain1, chain2, d, secrets, tovault, vault and the
	// dangling link into made/.env are left out.
	want := []string{"abs", "dangling2.txt", "loop1", "loop2", "plain.txt", "sub"}
	if !slices.Equal(names, want) || hidden != 9 {
		t.Errorf("ReadDir = %v (hidden %d), want %v (hidden 9)", names, hidden, want)
	}
	var walked, denied []string
	err = root.WalkDir(func(p *env.Path, d fs.DirEntry, err error) error {
		if errors.Is(err, env.ErrDenied) {
			denied = append(denied, p.Rel())
			return nil
		}
		walked = append(walked, p.Rel())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range walked {
		if strings.Contains(w, "secrets") || strings.Contains(w, "vault") || strings.Contains(w, ".env") {
			t.Errorf("the walk reached %s", w)
		}
	}
	if !slices.Contains(denied, "secrets") || slices.Contains(denied, "secrets/key") || !slices.Contains(walked, "sub/plain.txt") {
		t.Errorf("walked %v, denied %v", walked, denied)
	}
	d, _ := gb.Resolve("d", env.Read)
	if _, _, err := d.ReadDir(0); !errors.Is(err, env.ErrDenied) {
		t.Errorf("ReadDir of a link to a denied directory: %v", err)
	}
}

// The race of a link swapped between the decision and the open: while
// one goroutine swaps notes.txt between a file and a link to .env,
// guarded reads never return the secret and writes never reach .env.
func TestGuardRace(t *testing.T) {
	dir, b := linkTree(t)
	gb := b.WithGuard(&denyGuard{deny: []string{".env"}})
	notes := filepath.Join(dir, "notes.txt")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tmp := filepath.Join(dir, "notes.tmp")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.Remove(tmp)
			if i%2 == 0 {
				os.Symlink(".env", tmp)
			} else {
				os.WriteFile(tmp, []byte("notes"), 0o644)
			}
			os.Rename(tmp, notes)
		}
	})
	ok := 0
	for range 2000 {
		data, err := gb.ReadFile("notes.txt", 0)
		if strings.Contains(string(data), secret) {
			close(stop)
			wg.Wait()
			t.Fatalf("read the secret through a swapped link")
		}
		if err == nil {
			ok++
		}
		if err := gb.WriteFile("notes.txt", []byte("notes")); err == nil {
			if data, _ := os.ReadFile(filepath.Join(dir, ".env")); string(data) != secret {
				close(stop)
				wg.Wait()
				t.Fatalf("a write went through a swapped link to .env")
			}
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d of 2000 reads raced through", ok)
	os.Remove(notes)
	writeFile(t, notes, "notes")
	if data, err := gb.ReadFile("notes.txt", 0); err != nil || string(data) != "notes" {
		t.Errorf("a read once the swapping stopped: %q, %v", data, err)
	}
}

type allowAll struct{}

func (allowAll) Allow(env.Target) error { return nil }

// BenchmarkOpen is the cost a guard adds to each open: the kernel's name
// of the descriptor (readlink) mapped into the mounts, and the guard's
// call (here one that allows everything).
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	writeFile(b, filepath.Join(dir, "src", "pkg", "deep", "file.go"), "package deep\n")
	bind := mustBinding(b, event.Mount{ID: "work", Kind: event.KindLocal, Path: dir, Mode: "rw", Default: true})
	for name, bb := range map[string]*env.Binding{"plain": bind, "guarded": bind.WithGuard(allowAll{})} {
		b.Run(name, func(b *testing.B) {
			p, err := bb.Resolve("src/pkg/deep/file.go", env.Read)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				f, err := p.Open()
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}
