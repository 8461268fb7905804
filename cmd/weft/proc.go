package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/store/record"
)

type psCmd struct {
	Session string `short:"s" help:"The session whose processes to list (default: every session)." placeholder:"SESSION"`
	All     bool   `help:"Also list processes that ended."`
	JSON    bool   `name:"json" help:"Print each process as one JSON line."`
}

func (c *psCmd) Run(ctx context.Context, a *app) error {
	cl, err := a.postHost("weft")
	if err != nil {
		return err
	}
	defer cl.Close()
	p := api.ProcessListParams{SessionID: c.Session}
	if !c.All {
		p.Status = record.ProcessRunning
	}
	res, err := cl.ListProcesses(ctx, p)
	if err != nil {
		return a.hostError(err)
	}
	if c.JSON {
		for _, pr := range res.Processes {
			if err := printJSON(a, pr); err != nil {
				return err
			}
		}
		return nil
	}
	if len(res.Processes) == 0 {
		if c.All {
			fmt.Fprintln(a.stderr, "weft: no processes")
		} else {
			fmt.Fprintln(a.stderr, "weft: no process is running (--all lists those that ended)")
		}
		return nil
	}
	procs := res.Processes
	if c.Session != "" {
		// A subagent's processes belong to its own session: list them
		// under it.
		if procs, err = withChildProcesses(ctx, cl, p, procs); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSESSION\tSTATUS\tSTARTED\tCOMMAND")
	for _, row := range processTree(procs) {
		pr := row.p
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\n", row.indent, pr.ID, pr.SessionID, processStatus(pr.Status, pr.ExitCode), pr.StartedAt.Local().Format("15:04:05"), clip(processWhat(pr.Spec), 60))
	}
	return tw.Flush()
}

// processLister is what withChildProcesses asks.
type processLister interface {
	ListProcesses(ctx context.Context, p api.ProcessListParams) (*api.ProcessListResult, error)
}

// withChildProcesses adds to procs the processes of the sessions of the
// subagents among them, and theirs (as listed by p, for each session).
func withChildProcesses(ctx context.Context, cl processLister, p api.ProcessListParams, procs []record.Process) ([]record.Process, error) {
	seen := map[string]bool{p.SessionID: true}
	for i := 0; i < len(procs); i++ {
		a := procs[i].Spec.Agent
		if a == nil || seen[a.SessionID] {
			continue
		}
		seen[a.SessionID] = true
		p.SessionID = a.SessionID
		res, err := cl.ListProcesses(ctx, p)
		if err != nil {
			return nil, err
		}
		procs = append(procs, res.Processes...)
	}
	return procs, nil
}

type treeRow struct {
	p      record.Process
	indent string
}

// processTree orders procs as a tree: the processes of a subagent's
// session follow the subagent's process, indented.
func processTree(procs []record.Process) []treeRow {
	under := map[string][]record.Process{} // child session -> its processes
	agentOf := map[string]bool{}           // sessions that are some listed subagent's
	for _, p := range procs {
		if p.Spec.Agent != nil {
			agentOf[p.Spec.Agent.SessionID] = true
		}
	}
	var top []record.Process
	for _, p := range procs {
		if agentOf[p.SessionID] {
			under[p.SessionID] = append(under[p.SessionID], p)
		} else {
			top = append(top, p)
		}
	}
	var out []treeRow
	var walk func(ps []record.Process, prefix string, depth int)
	walk = func(ps []record.Process, prefix string, depth int) {
		for i, p := range ps {
			indent, next := "", ""
			if depth > 0 {
				indent, next = prefix+"├─ ", prefix+"│  "
				if i == len(ps)-1 {
					indent, next = prefix+"└─ ", prefix+"   "
				}
			}
			out = append(out, treeRow{p, indent})
			if a := p.Spec.Agent; a != nil && depth < 8 {
				walk(under[a.SessionID], next, depth+1)
				delete(under, a.SessionID)
			}
		}
	}
	walk(top, "", 0)
	for _, ps := range under { // children whose parent process is not listed
		walk(ps, "", 0)
	}
	return out
}

// processWhat is what a process runs.
func processWhat(s record.ProcessSpec) string {
	if s.Command != "" {
		return s.Command
	}
	if a := s.Agent; a != nil {
		return "agent " + a.SessionID + ": " + strings.Join(strings.Fields(a.Prompt), " ")
	}
	return "tool " + s.Tool
}

// processStatus is a process's status with its exit code.
func processStatus(status string, code *int) string {
	if code != nil {
		return fmt.Sprintf("%s (exit %d)", status, *code)
	}
	return status
}

type procCmd struct {
	Logs   procLogsCmd   `cmd:"" help:"Print a process's output; --follow keeps printing until it ends."`
	Wait   procWaitCmd   `cmd:"" help:"Wait for a process to end and print its status."`
	Signal procSignalCmd `cmd:"" help:"Send a signal (interrupt, terminate, kill, hangup, or any name recorded as signal.NAME)."`
	Kill   procKillCmd   `cmd:"" help:"Cancel a process (its whole process group)."`
}

type procLogsCmd struct {
	ID     string `arg:"" help:"The process ID."`
	Follow bool   `short:"f" help:"Keep printing output as it comes, until the process ends."`
	Offset int64  `help:"Start at this byte offset." placeholder:"N"`
}

func (c *procLogsCmd) Run(ctx context.Context, a *app) error {
	cl, err := a.dialHost(ctx, "weft")
	if err != nil {
		return err
	}
	defer cl.Close()
	w := &logWriter{w: a.stdout}
	if c.Follow {
		ctx, cancel := a.interruptible(ctx)
		defer cancel()
		seq, err := cl.FollowProcess(ctx, api.ProcessFollowParams{ID: c.ID, Offset: c.Offset})
		if err != nil {
			return err
		}
		for ch, err := range seq {
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			if ch.Skipped > 0 {
				fmt.Fprintf(a.stderr, "weft: %s dropped by the output cap\n", countOf(ch.Skipped, "byte"))
			}
			w.chunk(ch)
		}
		return nil
	}
	offset := c.Offset
	for {
		out, err := cl.ProcessOutput(ctx, api.ProcessOutputParams{ID: c.ID, Offset: offset, Limit: 1 << 20})
		if err != nil {
			return err
		}
		if out.Truncated {
			fmt.Fprintf(a.stderr, "weft: output before offset %d was dropped by the output cap\n", out.Offset)
		}
		for _, ch := range out.Chunks {
			w.chunk(ch)
		}
		if len(out.Chunks) == 0 {
			a.stdout.Write(out.Data)
		}
		if out.Next >= out.Total || out.Next == offset {
			return nil
		}
		offset = out.Next
	}
}

// logWriter writes a process's output as it was: the bytes of its chunks,
// and in place of a lost range its mark ("[N bytes lost at offset X: store
// unavailable]") on a line of its own.
type logWriter struct {
	w       io.Writer
	midLine bool // the last byte written was not a newline
}

func (lw *logWriter) chunk(c api.Chunk) {
	if c.Lost > 0 {
		if lw.midLine {
			io.WriteString(lw.w, "\n")
		}
		io.WriteString(lw.w, c.LostNote()+"\n")
		lw.midLine = false
		return
	}
	if len(c.Data) > 0 {
		lw.w.Write(c.Data)
		lw.midLine = c.Data[len(c.Data)-1] != '\n'
	}
}

type procWaitCmd struct {
	ID      string        `arg:"" help:"The process ID."`
	Timeout time.Duration `help:"Give up after this long (0: wait forever)." default:"0"`
	JSON    bool          `name:"json" help:"Print the process record as JSON."`
}

func (c *procWaitCmd) Run(ctx context.Context, a *app) error {
	cl, err := a.dialHost(ctx, "weft")
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(c.Timeout)
	for {
		step := 60 * time.Second
		if c.Timeout > 0 {
			step = min(step, time.Until(deadline))
		}
		r, err := cl.AwaitProcess(ctx, api.ProcessAwaitParams{ID: c.ID, TimeoutMs: max(step.Milliseconds(), 0)})
		if err != nil {
			return err
		}
		if !r.TimedOut || c.Timeout > 0 && time.Now().After(deadline) {
			if c.JSON {
				b, _ := json.Marshal(r.Process)
				fmt.Fprintf(a.stdout, "%s\n", b)
			} else {
				fmt.Fprintf(a.stdout, "%s %s %s\n", r.Process.ID, processStatus(r.Process.Status, r.Process.ExitCode), clip(processWhat(r.Process.Spec), 60))
			}
			if r.Process.LostBytes > 0 {
				fmt.Fprintf(a.stderr, "weft: %s of its output lost while the store was unavailable; weft proc logs marks where\n", countOf(r.Process.LostBytes, "byte"))
			}
			if r.TimedOut {
				return &exitError{code: exitFailed, err: fmt.Errorf("process %s is still running", c.ID)}
			}
			if r.Process.Status != record.ProcessCompleted {
				return &exitError{code: exitFailed}
			}
			return nil
		}
	}
}

type procSignalCmd struct {
	ID      string `arg:"" help:"The process ID."`
	Name    string `arg:"" help:"The signal name."`
	Payload string `help:"A JSON payload recorded with the signal." placeholder:"JSON"`
	JSON    bool   `name:"json" help:"Print the result as JSON."`
}

func (c *procSignalCmd) Run(ctx context.Context, a *app) error {
	p := api.ProcessSignalParams{ID: c.ID, Name: strings.TrimPrefix(strings.ToLower(c.Name), "sig")}
	if c.Payload != "" {
		if !json.Valid([]byte(c.Payload)) {
			return usageErr("--payload is not valid JSON")
		}
		p.Payload = json.RawMessage(c.Payload)
	}
	r, err := hostCall(ctx, a, "weft", api.ProcessSignal, p)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(a, r)
	}
	fmt.Fprintf(a.stdout, "%s: signal.%s recorded (seq %d)\n", c.ID, p.Name, r.Seq)
	return nil
}

type procKillCmd struct {
	ID     string `arg:"" help:"The process ID."`
	Reason string `help:"Why, recorded in the process log."`
}

func (c *procKillCmd) Run(ctx context.Context, a *app) error {
	r, err := hostCall(ctx, a, "weft", api.ProcessCancel, api.ProcessCancelParams{ID: c.ID, Reason: c.Reason})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s %s\n", r.ID, r.Status)
	return nil
}
