package host_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
)

// BenchmarkCheckpoint measures the checkpoint of one step (the hook
// before the step's calls and after them, the calls' own work outside
// the timing but for the writes the step makes):
//
//   - none: a step of tools that do not write (read_file), in a mount
//     of 10,000 files: nothing is looked at.
//   - files10: write_file to 10 files of a mount of 10,000: only those
//     paths are looked at, hashed and kept.
//   - shell: a shell step in a mount of 10,000 files (in 100
//     directories) that changed 10 of them: the whole mount is walked.
func BenchmarkCheckpoint(b *testing.B) {
	mk := func(b *testing.B) (*host.Host, *env.Binding, string) {
		dir := b.TempDir()
		for d := range 100 {
			sub := filepath.Join(dir, fmt.Sprintf("d%03d", d))
			if err := os.Mkdir(sub, 0o755); err != nil {
				b.Fatal(err)
			}
			for f := range 100 {
				if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.txt", f)), []byte(fmt.Sprintf("file %d %d\n", d, f)), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
		bd, err := env.NewBinding(1, []event.Mount{{ID: "work", Kind: event.KindLocal, Path: dir, Mode: event.ModeReadWrite, Default: true}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { bd.Close() })
		h, _ := newBenchHost(b, host.Config{CheckpointDir: b.TempDir()})
		return h, bd, dir
	}
	ctx := context.Background()
	write10 := func(dir string, n int) func() {
		return func() {
			for f := range 10 {
				os.WriteFile(filepath.Join(dir, "d000", fmt.Sprintf("f%03d.txt", f)), []byte(fmt.Sprintf("step %d\n", n)), 0o644)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		calls func(n int) []event.ToolCall
	}{
		{"none", func(int) []event.ToolCall {
			return []event.ToolCall{{ID: "c", Name: "read_file", Arguments: `{"path":"d000/f000.txt"}`}}
		}},
		{"files10", func(int) []event.ToolCall {
			var cs []event.ToolCall
			for f := range 10 {
				cs = append(cs, event.ToolCall{ID: fmt.Sprint("c", f), Name: "write_file", Arguments: fmt.Sprintf(`{"path":"d000/f%03d.txt","content":"x"}`, f)})
			}
			return cs
		}},
		{"shell", func(int) []event.ToolCall {
			return []event.ToolCall{{ID: "c", Name: "shell", Arguments: `{"command":"true"}`}}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h, bd, dir := mk(b)
			// The first step takes the mount's baseline.
			host.Checkpoint(h, ctx, "ses_bench", bd, tc.calls(0), func() {})
			var total time.Duration
			n := 0
			for b.Loop() {
				n++
				b.StopTimer()
				write := write10(dir, n)
				if tc.name == "none" {
					write = func() {}
				}
				b.StartTimer()
				t0 := time.Now()
				evs := host.Checkpoint(h, ctx, "ses_bench", bd, tc.calls(n), func() {
					b.StopTimer()
					write()
					b.StartTimer()
				})
				total += time.Since(t0)
				if tc.name != "none" && len(evs) != 1 {
					b.Fatalf("%d checkpoint events", len(evs))
				}
			}
			_ = total
		})
	}
}
