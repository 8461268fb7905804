// Package builtin provides the built-in tools: read_file, write_file,
// edit_file, list_dir, glob, grep and shell.
//
// Every file tool resolves the model's path through the call's
// [env.Binding] and does its I/O through the [env.Path] helpers; none opens
// a model-supplied path itself. Results name files by their display path,
// /environment/<mount>/<rel>. Tools are safe for concurrent use.
package builtin

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/tool"
)

// Options configures the built-in tools. The zero value gives the
// defaults noted on each field.
type Options struct {
	// ReadMaxLines is how many lines read_file returns when no limit is
	// given, and the most it returns at all. Zero means 2000.
	ReadMaxLines int
	// ReadMaxBytes caps the bytes of one read_file result. Zero means 256 KiB.
	ReadMaxBytes int
	// MaxLineBytes cuts longer lines in read_file and grep output. Zero
	// means 2000.
	MaxLineBytes int
	// EditMaxBytes is the largest file edit_file will rewrite. Zero means
	// 10 MiB.
	EditMaxBytes int64
	// ListLimit caps list_dir entries. Zero means 1000.
	ListLimit int
	// GlobLimit caps glob matches. Zero means 1000.
	GlobLimit int
	// GrepLimit caps grep matching lines. Zero means 500.
	GrepLimit int
	// GrepMaxFileBytes: grep skips larger files. Zero means 10 MiB.
	GrepMaxFileBytes int64
	// WalkLimit caps the entries glob and grep visit. Zero means 200000.
	WalkLimit int

	// Shell is the shell binary, run as Shell -c COMMAND. Empty means /bin/sh.
	Shell string
	// ShellPath is PATH for shell commands. Empty means
	// /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin.
	ShellPath string
	// ShellEnv holds extra KEY=VALUE entries for shell commands, appended
	// after the allow-list (see the shell tool).
	ShellEnv []string
	// ShellOutputCap caps the combined stdout and stderr kept from a
	// command: its first and last halves, with a note of how much was
	// left out between them. The caller's result budget
	// (tool.Call.ResultBudget) lowers it, so that the exit code that ends
	// every result is never cut off. Zero means 64 KiB.
	ShellOutputCap int
	// ShellTimeout is the timeout of a command that names none. Zero
	// means 2 minutes.
	ShellTimeout time.Duration
	// ShellMaxTimeout is the longest timeout a command may ask for. Zero
	// means 10 minutes.
	ShellMaxTimeout time.Duration
	// ShellKillGrace is how long a process group has between SIGTERM and
	// SIGKILL. Zero means 2 seconds.
	ShellKillGrace time.Duration
	// Sandbox runs shell commands under the sandbox helper (see package
	// sandbox): each runs through [sandbox.Command] with the call's
	// mounts, confined by Landlock and refused when the kernel has none
	// unless Sandbox.Unsandboxed is set, and with its whole process tree
	// contained, so that nothing it starts outlives the call. Nil runs
	// commands directly, unconfined, uncontained (only the shell's
	// process group is stopped) and without a private TMPDIR: an
	// embedder's explicit opt-out. The weft host and command line always
	// set it. The program must call [sandbox.Main] when
	// [sandbox.IsHelper] reports true.
	Sandbox *sandbox.Config
	// Background starts the shell tool's background commands; nil makes
	// background: true an error result.
	Background BackgroundStarter
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.ReadMaxLines, 2000)
	def(&o.ReadMaxBytes, 256<<10)
	def(&o.MaxLineBytes, 2000)
	def(&o.ListLimit, 1000)
	def(&o.GlobLimit, 1000)
	def(&o.GrepLimit, 500)
	def(&o.WalkLimit, 200000)
	def(&o.ShellOutputCap, 64<<10)
	if o.EditMaxBytes <= 0 {
		o.EditMaxBytes = 10 << 20
	}
	if o.GrepMaxFileBytes <= 0 {
		o.GrepMaxFileBytes = 10 << 20
	}
	if o.Shell == "" {
		o.Shell = "/bin/sh"
	}
	if o.ShellPath == "" {
		o.ShellPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	if o.ShellTimeout <= 0 {
		o.ShellTimeout = 2 * time.Minute
	}
	if o.ShellMaxTimeout <= 0 {
		o.ShellMaxTimeout = 10 * time.Minute
	}
	if o.ShellTimeout > o.ShellMaxTimeout {
		o.ShellTimeout = o.ShellMaxTimeout
	}
	if o.ShellKillGrace <= 0 {
		o.ShellKillGrace = 2 * time.Second
	}
	o.ShellEnv = append([]string(nil), o.ShellEnv...)
	if o.Sandbox != nil {
		sb := *o.Sandbox
		sb.ReadOnly = append([]string(nil), sb.ReadOnly...)
		o.Sandbox = &sb
	}
	return o
}

// Register adds every built-in tool to r, configured by opts (copied).
// It fails if a name is already taken.
func Register(r *tool.Registry, opts Options) error {
	t := &tools{opts: opts.withDefaults()}
	all, err := t.all()
	if err != nil {
		return err
	}
	for _, tl := range all {
		if err := r.Add(tl); err != nil {
			return fmt.Errorf("builtin: %w", err)
		}
	}
	return nil
}

// tools holds the configuration shared by the built-in tools.
type tools struct {
	opts Options
}

func (t *tools) all() ([]tool.Tool, error) {
	var out []tool.Tool
	var errs []error
	add := func(tl tool.Tool, err error) {
		out = append(out, tl)
		errs = append(errs, err)
	}
	add(tool.Func("read_file", t.readFileDesc(), t.readFile))
	add(tool.Func("write_file", writeFileDesc, t.writeFile))
	add(tool.Func("edit_file", editFileDesc, t.editFile))
	add(tool.Func("list_dir", listDirDesc, t.listDir))
	add(tool.Func("glob", globDesc, t.glob))
	add(tool.Func("grep", grepDesc, t.grep))
	add(tool.Func("shell", t.shellDesc(), t.shell))
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("builtin: %w", err)
	}
	return out, nil
}

// sniffLen is how much of a file decides whether it is binary.
const sniffLen = 8000

// isBinary reports whether head, the start of a file, looks binary: it
// holds a NUL byte.
func isBinary(head []byte) bool {
	return bytes.IndexByte(head[:min(len(head), sniffLen)], 0) >= 0
}

// cutLine shortens a line to max bytes at a UTF-8 boundary.
func cutLine(line []byte, max int) string {
	if len(line) <= max {
		return string(line)
	}
	n := max
	for n > 0 && line[n]&0xC0 == 0x80 {
		n--
	}
	return fmt.Sprintf("%s… [line cut: %d bytes]", line[:n], len(line))
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
