package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"weft.dev/weft/env"
	"weft.dev/weft/tool"
)

func (t *tools) readFileDesc() string {
	return fmt.Sprintf("Read a text file. Returns numbered lines (\"    12\\tline\"). "+
		"Relative paths are in the default mount; other mounts are /environment/<mount>/... "+
		"Returns at most %d lines or %d bytes; use offset (first line, from 1) and limit (number of lines) to page through larger files. "+
		"Binary files are refused.", t.opts.ReadMaxLines, t.opts.ReadMaxBytes)
}

type readFileArgs struct {
	Path   string `json:"path" jsonschema:"the file to read: relative to the default mount, or /environment/<mount>/..."`
	Offset int    `json:"offset,omitempty" jsonschema:"the first line to return, counting from 1 (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many lines to return (default: as many as the tool's cap allows)"`
}

func (t *tools) readFile(ctx context.Context, call *tool.Call, in readFileArgs) (tool.Result, error) {
	if in.Offset < 0 || in.Limit < 0 {
		return tool.Result{}, errors.New("offset and limit must not be negative")
	}
	offset := max(in.Offset, 1)
	limit := in.Limit
	if limit == 0 || limit > t.opts.ReadMaxLines {
		limit = t.opts.ReadMaxLines
	}
	p, err := call.Env.Resolve(in.Path, env.Read)
	if err != nil {
		return tool.Result{}, err
	}
	f, err := p.Open()
	if err != nil {
		return tool.Result{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return tool.Result{}, fmt.Errorf("%s: %w", p, errors.Unwrap(err))
	}
	if fi.IsDir() {
		return tool.Result{}, fmt.Errorf("%s is a directory; use list_dir", p)
	}
	if fi.Size() == 0 {
		return tool.Result{Output: fmt.Sprintf("[%s is empty]", p)}, nil
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(sniffLen)
	if isBinary(head) {
		return tool.Result{}, fmt.Errorf("%s looks binary (%d bytes); read_file shows text only", p, fi.Size())
	}

	var out strings.Builder
	lineNo, shown, last := 0, 0, 0
	full := false    // output budget reached
	counted := 0     // bytes read only to count lines
	partial := false // stopped counting before the end
	for {
		if err := ctx.Err(); err != nil {
			return tool.Result{}, err
		}
		line, rerr := readLine(br)
		if rerr != nil && len(line) == 0 {
			if rerr == io.EOF {
				break
			}
			return tool.Result{}, fmt.Errorf("%s: %w", p, errors.Unwrap(rerr))
		}
		lineNo++
		if lineNo < offset || shown >= limit || full {
			// Keep counting lines, but not through gigabytes.
			if counted += len(line); counted > maxCountBytes && shown > 0 {
				partial = true
				break
			}
			continue
		}
		text := fmt.Sprintf("%6d\t%s\n", lineNo, cutLine(bytes.TrimRight(line, "\r\n"), t.opts.MaxLineBytes))
		if out.Len()+len(text) > t.opts.ReadMaxBytes {
			if shown > 0 {
				full = true
				continue
			}
			// Show at least part of the first line.
			text = cutLine([]byte(text), t.opts.ReadMaxBytes/2) + "\n"
		}
		out.WriteString(text)
		shown++
		last = lineNo
	}
	total := lineNo
	switch {
	case offset > total:
		return tool.Result{}, fmt.Errorf("offset %d is past the end of %s (%s)", offset, p, plural(total, "line"))
	case last < total:
		why := ""
		if full {
			why = fmt.Sprintf(" (output limit of %d bytes)", t.opts.ReadMaxBytes)
		}
		of := fmt.Sprint(total)
		if partial {
			of = fmt.Sprintf("more than %d", total)
		}
		fmt.Fprintf(&out, "[lines %d-%d of %s%s; call read_file with offset=%d to read on]\n", offset, last, of, why, last+1)
	}
	return tool.Result{Output: out.String()}, nil
}

// maxCountBytes bounds how far read_file reads past what it shows, only
// to count the file's lines.
const maxCountBytes = 64 << 20

// readLine returns the next line, without keeping more than the reader's
// buffer of an overlong line: the rest of such a line is skipped.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return append([]byte(nil), line...), err
	}
	kept := append([]byte(nil), line...)
	for err == bufio.ErrBufferFull {
		_, err = br.ReadSlice('\n')
	}
	if err == io.EOF {
		err = nil
	}
	return kept, err
}

const writeFileDesc = `Write a file, replacing its contents; creates the file and its parent directories. ` +
	`Refused on read-only mounts. Prefer edit_file to change part of an existing file.`

type writeFileArgs struct {
	Path    string `json:"path" jsonschema:"the file to write: relative to the default mount, or /environment/<mount>/..."`
	Content string `json:"content" jsonschema:"the complete new contents"`
}

func (t *tools) writeFile(ctx context.Context, call *tool.Call, in writeFileArgs) (tool.Result, error) {
	p, err := call.Env.Resolve(in.Path, env.Write)
	if err != nil {
		return tool.Result{}, err
	}
	verb := "created"
	if _, err := p.Stat(); err == nil {
		verb = "replaced"
	}
	if err := p.WriteFile([]byte(in.Content)); err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Output: fmt.Sprintf("%s %s (%s)", verb, p, plural(len(in.Content), "byte"))}, nil
}

const editFileDesc = `Replace exact text in a file. oldString must match the file exactly, ` +
	`whitespace included, and occur once unless replaceAll is set; include surrounding lines to make it unique.`

type editFileArgs struct {
	Path       string `json:"path" jsonschema:"the file to edit: relative to the default mount, or /environment/<mount>/..."`
	OldString  string `json:"oldString" jsonschema:"the exact text to replace"`
	NewString  string `json:"newString" jsonschema:"the text to put in its place"`
	ReplaceAll bool   `json:"replaceAll,omitempty" jsonschema:"replace every occurrence instead of requiring exactly one"`
}

func (t *tools) editFile(ctx context.Context, call *tool.Call, in editFileArgs) (tool.Result, error) {
	if in.OldString == "" {
		return tool.Result{}, errors.New("oldString is empty; use write_file to create or replace a whole file")
	}
	if in.OldString == in.NewString {
		return tool.Result{}, errors.New("oldString and newString are the same; nothing to do")
	}
	p, err := call.Env.Resolve(in.Path, env.Write)
	if err != nil {
		return tool.Result{}, err
	}
	data, err := p.ReadFile(t.opts.EditMaxBytes)
	if err != nil {
		return tool.Result{}, err
	}
	if isBinary(data) {
		return tool.Result{}, fmt.Errorf("%s looks binary; edit_file edits text only", p)
	}
	text := string(data)
	n := strings.Count(text, in.OldString)
	switch {
	case n == 0:
		return tool.Result{}, fmt.Errorf("oldString not found in %s; read_file it to see the current text (whitespace and indentation must match exactly)", p)
	case n > 1 && !in.ReplaceAll:
		return tool.Result{}, fmt.Errorf("oldString occurs %d times in %s; add surrounding lines to make it unique, or set replaceAll", n, p)
	}
	if in.ReplaceAll {
		text = strings.ReplaceAll(text, in.OldString, in.NewString)
	} else {
		text = strings.Replace(text, in.OldString, in.NewString, 1)
	}
	if err := p.WriteFile([]byte(text)); err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Output: fmt.Sprintf("edited %s: replaced %s", p, plural(n, "occurrence"))}, nil
}

const listDirDesc = `List a directory: one entry per line with its type, size in bytes and name (directories end in /). ` +
	`path defaults to the default mount's root; /environment/<mount> lists another mount.`

type listDirArgs struct {
	Path string `json:"path,omitempty" jsonschema:"the directory (default: the default mount's root)"`
}

func (t *tools) listDir(ctx context.Context, call *tool.Call, in listDirArgs) (tool.Result, error) {
	if in.Path == "" {
		in.Path = "."
	}
	p, err := call.Env.Resolve(in.Path, env.Read)
	if err != nil {
		return tool.Result{}, err
	}
	ents, hidden, err := p.ReadDir(t.opts.ListLimit + 1)
	if err != nil {
		return tool.Result{}, err
	}
	more := len(ents) > t.opts.ListLimit
	if more {
		ents = ents[:t.opts.ListLimit]
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%s:\n", p)
	for _, e := range ents {
		typ, size, name := entryType(e.Type()), "-", e.Name()
		switch {
		case e.IsDir():
			name += "/"
		case e.Type().IsRegular():
			if fi, err := e.Info(); err == nil {
				size = fmt.Sprint(fi.Size())
			}
		}
		fmt.Fprintf(&out, "%-7s %10s  %s\n", typ, size, name)
	}
	switch {
	case len(ents) == 0 && hidden == 0:
		out.WriteString("(empty)\n")
	case more:
		fmt.Fprintf(&out, "[first %d entries shown; the directory has more; use glob with a pattern to narrow]\n", len(ents))
	}
	if hidden > 0 {
		out.WriteString(hiddenNote(hidden))
	}
	return tool.Result{Output: out.String()}, nil
}

func entryType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m.IsRegular():
		return "file"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "other"
}
