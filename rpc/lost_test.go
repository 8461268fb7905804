package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/process"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/storetest"
)

// TestLostOutputOverTheWire: output a process lost while the store refused
// writes is marked, at its offsets, in process/output, process/follow and
// the SSE output stream.
func TestLostOutputOverTheWire(t *testing.T) {
	fst := &storetest.Faulty{Store: memory.New()}
	_, srv := newProcEnvWith(t, fst, process.Config{Store: fst, ChunkBytes: 64, OutageBuffer: 512, KillGrace: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.URL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	sess, err := c.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: dir, Default: true}}})
	if err != nil {
		t.Fatal(err)
	}
	gate := func(name string) string { return "while [ ! -e " + name + " ]; do sleep 0.01; done" }
	p, err := c.StartProcess(ctx, api.ProcessStartParams{SessionID: sess.ID,
		Command: "echo first; " + gate("go1") + "; seq 1 100; " + gate("go2") + "; echo last"})
	if err != nil {
		t.Fatal(err)
	}
	stored := func(n int64) func() bool {
		return func() bool { r, err := fst.Process(ctx, p.ID); return err == nil && r.OutputBytes >= n }
	}
	const first, seq = 6, 292 // "first\n", then `seq 1 100`
	proctest.Eventually(t, 10*time.Second, func() string { return "no first line" }, stored(first))
	fst.Fail(fmt.Errorf("disk: %w", syscall.EIO))
	touch := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	touch("go1")
	proctest.Eventually(t, 10*time.Second, func() string { return "the outage's output was never offered" }, func() bool {
		return fst.RefusedProcess(p.ID).OutputEnd >= first+seq
	})
	fst.Fail(nil)
	proctest.Eventually(t, 10*time.Second, func() string { return "held output never written" }, stored(first+seq))
	touch("go2")
	r, err := c.AwaitProcess(ctx, api.ProcessAwaitParams{ID: p.ID, TimeoutMs: 20000})
	if err != nil || r.TimedOut || r.Process.LostBytes == 0 || r.Process.DroppedBytes != r.Process.LostBytes || r.Process.OutputBytes != first+seq+5 {
		t.Fatalf("await = %+v, %v", r, err)
	}
	lost := r.Process.LostBytes
	// process/output over HTTP JSON-RPC.
	out, err := c.ProcessOutput(ctx, api.ProcessOutputParams{ID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	var marks []api.Chunk
	for _, ch := range out.Chunks {
		if ch.Lost > 0 {
			marks = append(marks, ch)
		}
	}
	if len(marks) != 1 || marks[0].Lost != lost || marks[0].Reason != api.LostStoreUnavailable || marks[0].Offset < first || out.Lost != lost ||
		int64(len(out.Data))+out.Lost != out.Next || !strings.HasPrefix(string(out.Data), "first\n") || !strings.HasSuffix(string(out.Data), "100\nlast\n") {
		t.Fatalf("process/output = %+v", out)
	}
	note := marks[0].LostNote()
	if !strings.Contains(r.Tail, note) {
		t.Errorf("await tail %q lacks %q", r.Tail, note)
	}
	// process/follow over WebSocket.
	follow, err := c.FollowProcess(ctx, api.ProcessFollowParams{ID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	var followed []api.Chunk
	for ch, err := range follow {
		if err != nil {
			t.Fatal(err)
		}
		followed = append(followed, ch)
	}
	if fmt.Sprint(followed) != fmt.Sprint(out.Chunks) {
		t.Errorf("followed %+v\nread %+v", followed, out.Chunks)
	}
	// SSE: the mark is an event whose id is the offset after it.
	req, _ := http.NewRequest("GET", srv.URL+"/v1/processes/"+p.ID+"/output", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var id string
	var sseMarks int
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			id = v
		}
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "{}" {
			var ch api.Chunk
			if err := json.Unmarshal([]byte(d), &ch); err != nil {
				t.Fatal(err)
			}
			if ch.Lost > 0 {
				sseMarks++
				if ch.Lost != lost || ch.Reason != api.LostStoreUnavailable || id != strconv.FormatInt(ch.End(), 10) {
					t.Errorf("SSE mark %+v with id %s", ch, id)
				}
			}
		}
	}
	if sseMarks != 1 || id != strconv.FormatInt(r.Process.OutputBytes, 10) {
		t.Errorf("SSE: %d marks, last id %s", sseMarks, id)
	}
}
