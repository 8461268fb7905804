package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// stdioServer is a JSON-RPC server child (`weft rpc`, `codex app-server`)
// spoken to over its standard input and output the way an outside client
// speaks to it: one JSON message a line each way, and every line the
// server writes decoded, since a client must decode a line to know what
// it is. Both sides of the warm-turn comparison are driven by it, so a
// turn means the same for both: from writing the request that starts it
// to reading the line of the notification that ends it.
//
// Its reader goroutine hands each reply to its caller and each
// notification to notify, with the time its line was read; it refuses
// requests from the server (which a text turn with approvals off should
// not make). The reader ends when the child's output does; Close kills
// the child and waits for both.
type stdioServer struct {
	name   string // for errors: "weft rpc", "codex app-server"
	ch     *child
	in     io.WriteCloser
	done   chan struct{} // closed when the reader ends
	notify func(method string, params json.RawMessage, at time.Time)

	wmu sync.Mutex // serialises writes to in

	mu      sync.Mutex
	id      int64
	pending map[int64]chan rpcReply
	readErr error
}

type rpcReply struct {
	result json.RawMessage
	err    error
}

// startStdioServer starts c with pipes for its standard input and output
// and reads its output, handing notifications to notify (called from the
// reader goroutine, one at a time).
func startStdioServer(c *exec.Cmd, name string, notify func(method string, params json.RawMessage, at time.Time)) (*stdioServer, error) {
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	ch, err := startChild(c)
	if err != nil {
		return nil, err
	}
	s := &stdioServer{name: name, ch: ch, in: in, done: make(chan struct{}), notify: notify, pending: map[int64]chan rpcReply{}}
	go s.read(out)
	return s, nil
}

func (s *stdioServer) pid() int { return s.ch.pid() }

func (s *stdioServer) read(out io.Reader) {
	defer close(s.done)
	br := bufio.NewReaderSize(out, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			s.handle(line, time.Now())
		}
		if err != nil {
			s.mu.Lock()
			s.readErr = fmt.Errorf("%s output ended: %w", s.name, err)
			for id, c := range s.pending {
				c <- rpcReply{err: s.readErr}
				delete(s.pending, id)
			}
			s.mu.Unlock()
			return
		}
	}
}

func (s *stdioServer) handle(line []byte, at time.Time) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return
	}
	switch {
	case m.Method != "" && len(m.ID) > 0:
		_ = s.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "weft-bench answers no requests"}})
	case m.Method != "":
		s.notify(m.Method, m.Params, at)
	case len(m.ID) > 0:
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		if err != nil {
			return
		}
		s.mu.Lock()
		c := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if c == nil {
			return
		}
		if m.Error != nil {
			c <- rpcReply{err: fmt.Errorf("error %d: %s", m.Error.Code, m.Error.Message)}
		} else {
			c <- rpcReply{result: m.Result}
		}
	}
}

func (s *stdioServer) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err = s.in.Write(append(b, '\n'))
	return err
}

// call sends a request and waits for its reply, decoded into result
// unless result is nil.
func (s *stdioServer) call(ctx context.Context, method string, params, result any) error {
	c := make(chan rpcReply, 1)
	s.mu.Lock()
	if s.readErr != nil {
		s.mu.Unlock()
		return s.readErr
	}
	s.id++
	id := s.id
	s.pending[id] = c
	s.mu.Unlock()
	if err := s.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		return err
	}
	select {
	case rep := <-c:
		if rep.err != nil {
			return fmt.Errorf("%s: %w", method, rep.err)
		}
		if result != nil {
			return json.Unmarshal(rep.result, result)
		}
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Close ends the child and waits for the reader.
func (s *stdioServer) Close() {
	s.in.Close()
	s.ch.Stop()
	<-s.done
}
