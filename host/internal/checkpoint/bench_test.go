package checkpoint_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"weft.dev/weft/host/internal/checkpoint"
)

// BenchmarkScan measures one Scan of a mount of 10,000 files in 100
// directories: "same" when nothing changed (the walk alone), "changed10"
// when 10 files changed between scans (the walk, and their content kept).
func BenchmarkScan(b *testing.B) {
	for _, changed := range []int{0, 10} {
		b.Run(map[int]string{0: "same", 10: "changed10"}[changed], func(b *testing.B) {
			root := b.TempDir()
			for d := range 100 {
				sub := filepath.Join(root, fmt.Sprintf("d%03d", d))
				if err := os.Mkdir(sub, 0o755); err != nil {
					b.Fatal(err)
				}
				for f := range 100 {
					if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.txt", f)), fmt.Appendf(nil, "file %d %d\n", d, f), 0o644); err != nil {
						b.Fatal(err)
					}
				}
			}
			s, err := checkpoint.New(checkpoint.Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			tr := s.Tracker("ses", "work", root)
			if err := tr.Baseline(); err != nil {
				b.Fatal(err)
			}
			n := 0
			for b.Loop() {
				n++
				b.StopTimer()
				for f := range changed {
					os.WriteFile(filepath.Join(root, "d050", fmt.Sprintf("f%03d.txt", f)), fmt.Appendf(nil, "step %d\n", n), 0o644)
				}
				b.StartTimer()
				res, err := tr.Scan()
				if err != nil || len(res.Changes) != changed {
					b.Fatalf("%d changes, %v", len(res.Changes), err)
				}
			}
		})
	}
}
