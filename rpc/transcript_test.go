package rpc_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"weft.dev/weft/rpc"
)

var update = flag.Bool("update", false, "rewrite the want section of testdata/transcripts/*.txtar")

// TestTranscripts replays testdata/transcripts/*.txtar over stdio. Each
// archive has a "send" file (one frame per line; "#" lines are comments;
// "!oversize N" sends a line of N bytes) and a "want" file: the expected
// frames, canonicalized (keys sorted, batch elements sorted) and sorted,
// because requests run concurrently. The server uses MaxFrameBytes 1024.
// Run with -update to regenerate "want" and review the diff.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/transcripts/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := parseTxtar(file)
			if err != nil {
				t.Fatal(err)
			}
			var send, want []byte
			wantIdx := -1
			for i, f := range ar.Files {
				switch f.Name {
				case "send":
					send = f.Data
				case "want":
					want, wantIdx = f.Data, i
				}
			}
			s := testServer(t, rpc.Config{MaxFrameBytes: 1024}, nil)
			p := startStdio(t, s)
			go func() {
				for line := range strings.SplitSeq(string(send), "\n") {
					switch {
					case line == "" || strings.HasPrefix(line, "#"):
						continue
					case strings.HasPrefix(line, "!oversize "):
						n, _ := strconv.Atoi(strings.TrimPrefix(line, "!oversize "))
						line = `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"` + strings.Repeat("x", n) + `"}}`
					}
					if _, err := p.in.Write([]byte(line + "\n")); err != nil {
						return
					}
				}
				p.in.Close()
			}()
			var got []string
			for p.out.Scan() {
				got = append(got, canonical(t, p.out.Bytes()))
			}
			if err := <-p.errc; err != nil {
				t.Errorf("ServeStdio: %v", err)
			}
			p.closed = true
			slices.Sort(got)
			gotText := strings.Join(got, "\n")
			if len(got) > 0 {
				gotText += "\n"
			}
			if *update {
				if wantIdx < 0 {
					ar.Files = append(ar.Files, txtarFile{Name: "want"})
					wantIdx = len(ar.Files) - 1
				}
				ar.Files[wantIdx].Data = []byte(gotText)
				if err := os.WriteFile(file, ar.format(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			var wantLines []string
			for l := range strings.SplitSeq(string(want), "\n") {
				if l != "" {
					wantLines = append(wantLines, canonical(t, []byte(l)))
				}
			}
			slices.Sort(wantLines)
			if !slices.Equal(got, wantLines) {
				t.Errorf("transcript mismatch\n got:\n%s\nwant:\n%s", gotText, strings.Join(wantLines, "\n"))
			}
		})
	}
}

// canonical re-encodes a frame with sorted keys and sorted batch
// elements, keeping numbers exact.
func canonical(t testing.TB, frame []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("server wrote invalid JSON %q: %v", frame, err)
	}
	if arr, ok := v.([]any); ok {
		slices.SortFunc(arr, func(a, b any) int {
			x, _ := json.Marshal(a)
			y, _ := json.Marshal(b)
			return bytes.Compare(x, y)
		})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(buf.String())
}

// txtarArchive is a minimal reader/writer of the txtar format
// (golang.org/x/tools/txtar), kept here to avoid a dependency.
type txtarArchive struct {
	Comment []byte
	Files   []txtarFile
}

type txtarFile struct {
	Name string
	Data []byte
}

func parseTxtar(path string) (*txtarArchive, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ar := &txtarArchive{}
	cur := -1
	for line := range strings.SplitAfterSeq(string(data), "\n") {
		trimmed := strings.TrimSuffix(line, "\n")
		if name, ok := strings.CutPrefix(trimmed, "-- "); ok && strings.HasSuffix(name, " --") {
			ar.Files = append(ar.Files, txtarFile{Name: strings.TrimSuffix(name, " --")})
			cur = len(ar.Files) - 1
			continue
		}
		if cur < 0 {
			ar.Comment = append(ar.Comment, line...)
		} else {
			ar.Files[cur].Data = append(ar.Files[cur].Data, line...)
		}
	}
	return ar, nil
}

func (ar *txtarArchive) format() []byte {
	var b bytes.Buffer
	b.Write(ar.Comment)
	for _, f := range ar.Files {
		b.WriteString("-- " + f.Name + " --\n")
		b.Write(f.Data)
		if len(f.Data) > 0 && f.Data[len(f.Data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
