package checkpoint_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"weft.dev/weft/host/internal/checkpoint"
)

// blob writes content into the blob store at dir as a blob modified at
// mod, and returns its hash.
func blob(t testing.TB, dir, content string, mod time.Time) string {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	h := hex.EncodeToString(sum[:])
	p := filepath.Join(dir, "blobs", h[:2], h)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, dir, h, mod)
	return h
}

func age(t testing.TB, dir, h string, mod time.Time) {
	t.Helper()
	if err := os.Chtimes(filepath.Join(dir, "blobs", h[:2], h), mod, mod); err != nil {
		t.Fatal(err)
	}
}

func exists(dir, h string) bool {
	_, err := os.Stat(filepath.Join(dir, "blobs", h[:2], h))
	return !errors.Is(err, fs.ErrNotExist)
}

func hashOf(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// TestSweep: a sweep removes the blobs nobody references and keeps those
// a log references (marked), those a tracker's manifest holds (a
// baseline no checkpoint names yet), those put while it runs, and those
// younger than the grace period; a dry sweep removes nothing.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	dir, root := t.TempDir(), t.TempDir()
	s, err := checkpoint.New(checkpoint.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	referenced := blob(t, dir, "referenced", old)
	garbage := blob(t, dir, "garbage", old)
	young := blob(t, dir, "young", time.Now())
	write(t, root, "base.txt", "in the baseline")
	if err := s.Tracker("ses", "work", root).Baseline(); err != nil {
		t.Fatal(err)
	}
	baseline := hashOf("in the baseline")
	age(t, dir, baseline, old)

	sweep := func(dry bool, during func()) checkpoint.SweepResult {
		t.Helper()
		sw, err := s.BeginSweep(time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		defer sw.Close()
		if _, err := s.BeginSweep(time.Hour); err == nil {
			t.Fatal("a second sweep began while one runs")
		}
		sw.Mark(referenced)
		sw.Mark("not a hash")
		if during != nil {
			during()
		}
		res, err := sw.Finish(ctx, dry)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	if res := sweep(true, nil); res.Removed != 1 || !exists(dir, garbage) {
		t.Fatalf("dry sweep: %+v, garbage there %v; want 1 to remove, nothing removed", res, exists(dir, garbage))
	}
	// A checkpoint in flight puts a blob while the sweep runs: a new
	// tracker's baseline (which no sweep marked), made old at once.
	other := t.TempDir()
	write(t, other, "new.txt", "written during the sweep")
	res := sweep(false, func() {
		if err := s.Tracker("ses2", "work", other).Baseline(); err != nil {
			t.Fatal(err)
		}
		age(t, dir, hashOf("written during the sweep"), old)
	})
	if res.Removed != 1 || res.RemovedBytes != int64(len("garbage")) {
		t.Errorf("sweep: %+v; want garbage removed", res)
	}
	for name, h := range map[string]string{"referenced": referenced, "young": young, "baseline": baseline, "in flight": hashOf("written during the sweep")} {
		if !exists(dir, h) {
			t.Errorf("the %s blob was removed", name)
		}
	}
	if exists(dir, garbage) {
		t.Error("the unreferenced blob is still there")
	}
	// Once its session is unloaded, nothing keeps the baseline: the next
	// sweep takes it (the next load takes a new baseline).
	s.Forget("ses")
	s.Forget("ses2")
	if res := sweep(false, nil); res.Removed != 2 || exists(dir, baseline) {
		t.Errorf("sweep after Forget: %+v; want both baselines removed", res)
	}
}

// BenchmarkSweep marks 5,000 of 10,000 blobs and sweeps the store dry
// (so each iteration sees the same blobs): the cost of a sweep beyond
// reading the logs.
func BenchmarkSweep(b *testing.B) {
	dir := b.TempDir()
	s, err := checkpoint.New(checkpoint.Config{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	hashes := make([]string, 10_000)
	for i := range hashes {
		hashes[i] = blob(b, dir, fmt.Sprint("blob ", i), old)
	}
	for b.Loop() {
		sw, err := s.BeginSweep(time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		for _, h := range hashes[:5000] {
			sw.Mark(h)
		}
		res, err := sw.Finish(context.Background(), true)
		sw.Close()
		if err != nil || res.Removed != 5000 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}
