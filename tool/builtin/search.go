package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"weft.dev/weft/env"
	"weft.dev/weft/tool"
)

// maxDoubleStars bounds "**" in a pattern, which matching tries at every
// depth.
const maxDoubleStars = 4

// globPattern is a slash-separated pattern: "**" matches any number of
// path components, other components are [path.Match] patterns.
type globPattern []string

func compileGlob(pat string) (globPattern, error) {
	if pat == "" {
		return nil, errors.New("empty pattern")
	}
	if strings.HasPrefix(pat, "/") {
		return nil, fmt.Errorf("pattern %q must be relative; give the directory in path", pat)
	}
	var parts globPattern
	stars := 0
	for c := range strings.SplitSeq(pat, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return nil, fmt.Errorf("pattern %q: \"..\" components are not allowed", pat)
		case "**":
			if len(parts) > 0 && parts[len(parts)-1] == "**" {
				continue
			}
			if stars++; stars > maxDoubleStars {
				return nil, fmt.Errorf("pattern %q has more than %d ** components", pat, maxDoubleStars)
			}
		default:
			if _, err := path.Match(c, ""); err != nil {
				return nil, fmt.Errorf("pattern %q: %w", pat, err)
			}
		}
		parts = append(parts, c)
	}
	return parts, nil
}

// match reports whether the slash-separated rel matches.
func (g globPattern) match(rel string) bool {
	return matchParts(g, strings.Split(rel, "/"))
}

func matchParts(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchParts(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// relTo returns p's path relative to the directory base (same mount).
func relTo(base, p *env.Path) string {
	if base.Rel() == "." {
		return p.Rel()
	}
	return strings.TrimPrefix(p.Rel(), base.Rel()+"/")
}

// errWalkLimit stops a walk that visited too many entries.
var errWalkLimit = errors.New("walk limit reached")

// walk visits the tree under base, skipping .git directories, stopping
// at ctx cancellation or after WalkLimit entries. fn sees every entry but
// base itself, and none the policy denies (counted in hidden).
func (t *tools) walk(ctx context.Context, base *env.Path, fn func(p *env.Path, d fs.DirEntry) error) (limited bool, hidden int, err error) {
	n := 0
	err = base.WalkDir(func(p *env.Path, d fs.DirEntry, err error) error {
		if err != nil {
			if p.Rel() == base.Rel() {
				return err
			}
			if errors.Is(err, env.ErrDenied) {
				hidden++
			}
			return nil // unreadable or denied entry: skip
		}
		if p.Rel() == base.Rel() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if n++; n > t.opts.WalkLimit {
			return errWalkLimit
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		return fn(p, d)
	})
	if errors.Is(err, errWalkLimit) {
		return true, hidden, nil
	}
	return false, hidden, err
}

// hiddenNote is the note of a listing that left out n entries the
// policy denies.
func hiddenNote(n int) string {
	if n == 1 {
		return "[1 entry left out: denied by policy]\n"
	}
	return fmt.Sprintf("[%d entries left out: denied by policy]\n", n)
}

const globDesc = `Find files and directories whose path matches a pattern, sorted. ` +
	`"*" and "?" match within one path component, "**" matches any number of directories: "**/*.go", "src/*/test_*.py". ` +
	`The pattern is relative to path (default: the default mount's root). .git directories are skipped.`

type globArgs struct {
	Pattern string `json:"pattern" jsonschema:"the pattern, such as **/*.go"`
	Path    string `json:"path,omitempty" jsonschema:"the directory to search (default: the default mount's root)"`
}

func (t *tools) glob(ctx context.Context, call *tool.Call, in globArgs) (tool.Result, error) {
	g, err := compileGlob(in.Pattern)
	if err != nil {
		return tool.Result{}, err
	}
	if in.Path == "" {
		in.Path = "."
	}
	base, err := call.Env.Resolve(in.Path, env.Read)
	if err != nil {
		return tool.Result{}, err
	}
	if err := isDir(base); err != nil {
		return tool.Result{}, err
	}
	var matches []string
	more := false
	limited, hidden, err := t.walk(ctx, base, func(p *env.Path, d fs.DirEntry) error {
		if !g.match(relTo(base, p)) {
			return nil
		}
		if len(matches) == t.opts.GlobLimit {
			more = true
			return fs.SkipAll
		}
		name := p.String()
		if d.IsDir() {
			name += "/"
		}
		matches = append(matches, name)
		return nil
	})
	if err != nil {
		return tool.Result{}, err
	}
	var out strings.Builder
	for _, m := range matches { // WalkDir visits in lexical order
		out.WriteString(m + "\n")
	}
	switch {
	case len(matches) == 0:
		fmt.Fprintf(&out, "no matches for %q under %s\n", in.Pattern, base)
	case more:
		fmt.Fprintf(&out, "[first %d matches shown; narrow the pattern or path]\n", len(matches))
	}
	if hidden > 0 {
		out.WriteString(hiddenNote(hidden))
	}
	if limited {
		fmt.Fprintf(&out, "[stopped after visiting %d entries; narrow the path]\n", t.opts.WalkLimit)
	}
	return tool.Result{Output: out.String()}, nil
}

func isDir(p *env.Path) error {
	fi, err := p.Stat()
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", p)
	}
	return nil
}

const grepDesc = `Search file contents with a regular expression (Go RE2 syntax). ` +
	`Prints file:line:text for each matching line. path is a file or directory (default: the default mount's root); ` +
	`glob filters file names ("*.go") or paths relative to path ("src/**/*.ts"). Binary files, symlinks, .git and files the policy denies are skipped.`

type grepArgs struct {
	Pattern    string `json:"pattern" jsonschema:"the regular expression (RE2 syntax)"`
	Path       string `json:"path,omitempty" jsonschema:"the file or directory to search (default: the default mount's root)"`
	Glob       string `json:"glob,omitempty" jsonschema:"only search files matching this pattern, such as *.go or src/**/*.ts"`
	IgnoreCase bool   `json:"ignoreCase,omitempty" jsonschema:"match case-insensitively"`
	Limit      int    `json:"limit,omitempty" jsonschema:"the most matching lines to return (default: the tool's cap)"`
}

func (t *tools) grep(ctx context.Context, call *tool.Call, in grepArgs) (tool.Result, error) {
	expr := in.Pattern
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return tool.Result{}, fmt.Errorf("bad pattern: %w", err)
	}
	var filter globPattern
	if in.Glob != "" {
		if filter, err = compileGlob(in.Glob); err != nil {
			return tool.Result{}, err
		}
	}
	limit := in.Limit
	if limit <= 0 || limit > t.opts.GrepLimit {
		limit = t.opts.GrepLimit
	}
	if in.Path == "" {
		in.Path = "."
	}
	base, err := call.Env.Resolve(in.Path, env.Read)
	if err != nil {
		return tool.Result{}, err
	}
	fi, err := base.Stat()
	if err != nil {
		return tool.Result{}, err
	}

	g := &grepper{re: re, limit: limit, maxLine: t.opts.MaxLineBytes, maxFile: t.opts.GrepMaxFileBytes}
	limited, hidden := false, 0
	if fi.IsDir() {
		limited, hidden, err = t.walk(ctx, base, func(p *env.Path, d fs.DirEntry) error {
			if !d.Type().IsRegular() {
				return nil
			}
			if filter != nil {
				rel := relTo(base, p)
				if !strings.Contains(in.Glob, "/") {
					rel = d.Name()
				}
				if !filter.match(rel) {
					return nil
				}
			}
			return g.file(ctx, p)
		})
	} else {
		// A file the policy denies is an error, not "no matches".
		f, oerr := base.Open()
		if oerr != nil {
			return tool.Result{}, oerr
		}
		f.Close()
		err = g.file(ctx, base)
	}
	hidden += g.denied
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return tool.Result{}, err
	}
	if len(g.out) == 0 && g.n == 0 {
		out := fmt.Sprintf("no matches for %q under %s (%s searched)\n", in.Pattern, base, plural(g.files, "file"))
		if hidden > 0 {
			out += hiddenNote(hidden)
		}
		return tool.Result{Output: out}, nil
	}
	if hidden > 0 {
		g.out = append(g.out, hiddenNote(hidden)...)
	}
	if g.full {
		g.out = fmt.Appendf(g.out, "[first %d matches shown; narrow the pattern, path or glob]\n", limit)
	}
	if g.skipped > 0 {
		g.out = fmt.Appendf(g.out, "[%s larger than %d bytes skipped]\n", plural(g.skipped, "file"), t.opts.GrepMaxFileBytes)
	}
	if limited {
		g.out = fmt.Appendf(g.out, "[stopped after visiting %d entries; narrow the path]\n", t.opts.WalkLimit)
	}
	return tool.Result{Output: string(g.out)}, nil
}

type grepper struct {
	re             *regexp.Regexp
	limit, maxLine int
	maxFile        int64
	out            []byte
	n, files       int
	skipped        int
	denied         int // files the policy denies, left out
	full           bool
}

// file greps one file; it returns fs.SkipAll once the limit is reached.
func (g *grepper) file(ctx context.Context, p *env.Path) error {
	f, err := p.Open()
	if err != nil {
		if errors.Is(err, env.ErrDenied) {
			g.denied++
		}
		return nil // vanished, irregular or refused: skip
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() > g.maxFile {
		g.skipped++
		return nil
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffLen); isBinary(head) {
		return nil
	}
	g.files++
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			if g.re.Match(line) {
				if g.n == g.limit {
					g.full = true
					return fs.SkipAll
				}
				g.n++
				g.out = fmt.Appendf(g.out, "%s:%d:%s\n", p, lineNo, cutLine(line, g.maxLine))
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil
		}
		if lineNo%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
