// Command weft is the command line of weft, a durable runtime host for LLM
// agents: run an agent, list sessions, read and follow their event logs.
//
// See docs/cli.md for the reference.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/alecthomas/kong"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/rpc"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// Exit codes.
const (
	exitOK        = 0
	exitFailed    = 1
	exitUsage     = 2
	exitCancelled = 130
)

// cli is the command tree.
type cli struct {
	Store string `help:"Store: a SQLite file path or sqlite:PATH (default $XDG_DATA_HOME/weft/weft.db), or a PostgreSQL URL postgres://…" env:"WEFT_STORE" placeholder:"DSN"`
	Host  string `help:"Address of a weft host (default 127.0.0.1:7878): HOST:PORT, or https://HOST:PORT for a host that serves TLS." env:"WEFT_HOST" placeholder:"ADDR"`
	TLSCA string `name:"tls-ca" help:"PEM file of the CA whose certificates the hosts present over TLS (https:// addresses, and forwarding between hosts); default: the system's roots." env:"WEFT_TLS_CA" placeholder:"FILE"`

	Chat      chatCmd      `cmd:"" default:"withargs" help:"The terminal UI: talk with an agent, steer its runs, answer its approvals (also: weft, or weft -m MODEL, on a terminal)."`
	Run       runCmd       `cmd:"" help:"Run an agent: stream its answer, record every event."`
	Sessions  sessionsCmd  `cmd:"" help:"List, remove or rename sessions."`
	Approvals approvalsCmd `cmd:"" help:"List the approvals and questions that wait for an answer."`
	Approve   approveCmd   `cmd:"" help:"Allow a tool call that waits for approval (through the host)."`
	Deny      denyCmd      `cmd:"" help:"Refuse a tool call that waits for approval (through the host)."`
	Answer    answerCmd    `cmd:"" help:"Answer a question the model asked (through the host)."`
	Events    eventsCmd    `cmd:"" help:"Print a session's events; --follow keeps printing as they are written."`
	Serve     serveCmd     `cmd:"" help:"Serve the host: JSON-RPC over HTTP and WebSocket, SSE."`
	Console   consoleCmd   `cmd:"" help:"Print (with --open, open) the web console's URL with a one-time login code."`
	RPC       rpcCmd       `cmd:"" name:"rpc" help:"Serve JSON-RPC on stdin/stdout (NDJSON)."`
	Attach    attachCmd    `cmd:"" help:"Replay and follow a session or a run from the host; reconnects by itself."`
	Steer     steerCmd     `cmd:"" help:"Inject input into an active run."`
	Cancel    cancelCmd    `cmd:"" help:"Cancel a run."`
	Status    statusCmd    `cmd:"" help:"Show a run."`
	Compact   compactCmd   `cmd:"" help:"Compact a session's conversation now: a summary replaces what its next run sends the model (the log keeps everything)."`
	Mount     mountCmd     `cmd:"" help:"Attach a directory to a session at /environment/ID (through the host)."`
	Unmount   unmountCmd   `cmd:"" help:"Detach a mount from a session (through the host)."`
	Mounts    mountsCmd    `cmd:"" help:"List a session's mounts (through the host)."`
	PS        psCmd        `cmd:"" name:"ps" help:"List a session's background processes (through the host)."`
	Proc      procCmd      `cmd:"" help:"Read, wait for, signal or kill a background process (through the host)."`
	MCP       mcpCmd       `cmd:"" name:"mcp" help:"List the MCP servers of the config file, or one's tools."`
	Migrate   migrateCmd   `cmd:"" help:"Create or upgrade a PostgreSQL store's schema (SQLite migrates when opened)."`
	Nodes     nodesCmd     `cmd:"" help:"List the hosts holding session leases in a PostgreSQL store, with their sessions and lease ages."`
	Schema    schemaCmd    `cmd:"" help:"Print the protocol as an OpenRPC document: methods, params and results as JSON Schema, notifications, event types, error codes."`
	Version   versionCmd   `cmd:"" help:"Print the version."`
	ACP       acpCmd       `cmd:"" name:"acp" help:"Speak the Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim)."`
	MCPServer mcpServerCmd `cmd:"" name:"mcp-server" help:"Serve weft to other agents as MCP tools on stdin/stdout: start, await, read, steer and cancel runs, answer approvals."`
	Fork      forkCmd      `cmd:"" help:"Make a new session whose history is a session's up to an event (through the host, or a host in this process)."`
	Rewind    rewindCmd    `cmd:"" help:"Take a session back to an event: its conversation, and with --files its mounts' files (through the host, or a host in this process)."`
	GC        gcCmd        `cmd:"" name:"gc" help:"Purge the ended sessions the retention policy selects and remove unreferenced checkpoint blobs now (through the host, or a host in this process); --dry-run lists."`
}

// app carries what every command needs: the streams and the environment.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// interrupts delivers SIGINT/SIGTERM; the run command cancels on the
	// first and exits at once on the second.
	interrupts <-chan os.Signal
	storeDSN   string
	host       string
	// server is what the host this command dialed last said of itself
	// in initialize; nil before a dial.
	server atomic.Pointer[rpc.Info]
	// hostOnce guards chosen, the host client commands talk to.
	hostOnce sync.Once
	chosen   *hostChoice
	// tlsCA is --tls-ca; tlsOnce guards tlsConf and tlsErr, what
	// tlsClientConfig read from it.
	tlsCA   string
	tlsOnce sync.Once
	tlsConf *tls.Config
	tlsErr  error
}

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func main() {
	// The shell sandbox re-executes this binary as its helper.
	if sandbox.IsHelper(os.Args) {
		sandbox.Main(os.Args) // never returns
	}
	// weft reports through its own slog handlers; the standard logger is
	// only used by dependencies, which print warnings weft has already
	// handled (the Gemini SDK's "Using GOOGLE_API_KEY" when weft sends
	// GEMINI_API_KEY).
	log.SetOutput(io.Discard)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, interrupts: sigs}
	os.Exit(a.main(context.Background(), os.Args[1:]))
}

// main parses args and runs the command, returning the exit code.
func (a *app) main(ctx context.Context, args []string) int {
	code, ok := a.parseAndRun(ctx, args, commandTree(args))
	if !ok {
		// What args name was not parsed in the tree of that command
		// alone: the whole tree says what is wrong, as it always did.
		code, _ = a.parseAndRun(ctx, args, nil)
	}
	return code
}

// parseAndRun parses args in a command tree and runs the command. The
// tree is the whole cli when tree is nil, else a struct holding the global
// flags and one command (see commandTree). With a one-command tree it
// reports !ok, having run nothing, when args do not parse.
func (a *app) parseAndRun(ctx context.Context, args []string, tree reflect.Type) (code int, ok bool) {
	var target any
	opts := []kong.Option{
		kong.Name("weft"),
		kong.Description("weft: a durable runtime host for LLM agents."),
		kong.Writers(a.stdout, a.stderr),
		kong.Exit(func(code int) { panic(exitPanic(code)) }),
		kong.UsageOnError(),
		kong.BindTo(ctx, (*context.Context)(nil)),
	}
	if tree == nil {
		target = &cli{}
	} else {
		target = reflect.New(tree).Interface()
		opts = append(opts, kong.PostBuild(dropHelp))
	}
	parser, err := kong.New(target, opts...)
	if err != nil {
		fmt.Fprintln(a.stderr, "weft:", err)
		return exitFailed, true
	}
	// weft with no command is the terminal UI (chat is the default
	// command, so its flags work alone: weft -m MODEL); without a
	// terminal it says what weft is and how to start.
	implicit := !slices.Contains(args, "chat") && !slices.ContainsFunc(args, func(s string) bool {
		return s == "-h" || s == "--help"
	})
	code, done := func() (code int, done bool) {
		defer func() {
			if r := recover(); r != nil {
				if p, ok := r.(exitPanic); ok {
					code, done = int(p), true
					return
				}
				panic(r)
			}
		}()
		kctx, err := parser.Parse(args)
		if err != nil {
			if tree != nil {
				return 0, false
			}
			fmt.Fprintln(a.stderr, "weft:", flagHint(args, err))
			return exitUsage, true
		}
		g := reflect.ValueOf(target).Elem()
		a.storeDSN, a.host = g.FieldByName("Store").String(), g.FieldByName("Host").String()
		a.tlsCA = g.FieldByName("TLSCA").String()
		if implicit && kctx.Command() == "chat" && !(isTerminal(a.stdin) && isTerminal(a.stdout)) {
			fmt.Fprint(a.stderr, shortUsage)
			return exitUsage, true
		}
		if err := kctx.Run(a); err != nil {
			var ee *exitError
			if errors.As(err, &ee) {
				if ee.err != nil {
					fmt.Fprintln(a.stderr, "weft:", ee.err)
				}
				return ee.code, true
			}
			fmt.Fprintln(a.stderr, "weft:", err)
			return exitFailed, true
		}
		return exitOK, true
	}()
	if !done {
		if tree != nil && code == 0 {
			return 0, false
		}
		return exitFailed, true
	}
	return code, true
}

// commandTree returns, when args name one of weft's commands, a struct
// type holding cli's global flags and that command's field alone; nil
// when they name none, or ask for help. Kong builds a node for every
// command and flag of its tree, by reflection and tag parsing, before it
// parses anything: for the whole cli that was a third of the CPU of a
// command such as `weft ps` that fails at once. The command's own flags
// and subcommands stay as they are.
func commandTree(args []string) reflect.Type {
	name := ""
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "-h" || arg == "--help" || arg == "--":
			return nil
		case arg == "--store" || arg == "--host" || arg == "--tls-ca":
			i++ // the flag's value
		case strings.HasPrefix(arg, "-"):
			// A flag after the command's name is the command's (or a
			// global one): the tree holds both. Before it, one that is not
			// global is the default command's, or unknown.
			if name == "" && !strings.HasPrefix(arg, "--store=") && !strings.HasPrefix(arg, "--host=") && !strings.HasPrefix(arg, "--tls-ca=") {
				return nil
			}
		case name == "":
			name = arg
		}
	}
	if name == "" {
		return nil
	}
	t := reflect.TypeFor[cli]()
	var fields []reflect.StructField
	var cmd *reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if _, isCmd := f.Tag.Lookup("cmd"); !isCmd {
			fields = append(fields, f)
			continue
		}
		n := f.Tag.Get("name")
		if n == "" {
			n = strings.ToLower(f.Name)
		}
		if n == name {
			cmd = &f
		}
	}
	if cmd == nil {
		return nil
	}
	for i := range fields {
		fields[i].Index, fields[i].Offset = nil, 0
	}
	c := *cmd
	c.Index, c.Offset = nil, 0
	return reflect.StructOf(append(fields, c))
}

// dropHelp empties the help texts of a one-command tree, which never
// shows them: it asks for no help (see commandTree), and args it does not
// parse go to the whole tree, whose usage says what is wrong. Kong
// interpolates every help text with a regular expression before it
// parses anything: for `weft run`'s flags that was a sixth of a one-shot
// run's instructions.
func dropHelp(k *kong.Kong) error {
	var drop func(n *kong.Node)
	drop = func(n *kong.Node) {
		n.Help, n.Detail = "", ""
		for _, f := range n.Flags {
			f.Help = ""
		}
		for _, p := range n.Positional {
			p.Help = ""
		}
		if n.Argument != nil {
			n.Argument.Help = ""
		}
		for _, c := range n.Children {
			drop(c)
		}
	}
	drop(k.Model.Node)
	return nil
}

// shortUsage is what weft alone says without a terminal.
const shortUsage = `weft: a durable runtime host for LLM agents.

  weft [-m PROVIDER:MODEL] [-s SESSION | -c]   the terminal UI (needs a terminal)
  weft run -p PROMPT [-m PROVIDER:MODEL]       run an agent and print its answer (or: the prompt on stdin)
  weft serve                                   a host that many clients share
  weft sessions | events | attach | approvals  what the store and the host hold
  weft --help                                  every command (docs/cli.md)
`

// exitPanic carries kong's exit (after --help) out of Parse.
type exitPanic int

type versionCmd struct {
	Sandbox bool `help:"Also print the shell sandbox's status on this kernel (it probes: a network namespace, a process, cgroups)."`
}

func (c versionCmd) Run(a *app) error {
	fmt.Fprintf(a.stdout, "weft %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if !c.Sandbox {
		// A version is a fast answer, as any tool's is: the sandbox's
		// probes cost more than the rest of the command together.
		return nil
	}
	cfg, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	st := cfg.Sandbox().Status()
	fmt.Fprintf(a.stdout, "shell sandbox: %s\n", st)
	_, ses, host := cfg.EffectiveLimits()
	by := "cgroup v1"
	if st.LimitsBy.Processes != sandbox.ByCgroupV1 {
		by = "not enforced: weft can make no cgroups here"
	}
	fmt.Fprintf(a.stdout, "commands together (%s): each session's %s; the host's %s\n", by, ses, host)
	return nil
}
