package policy

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"weft.dev/weft/api"
)

// A shell command is decided on what the shell will run, not on its
// text: it is parsed as dash (weft's /bin/sh) parses it, every simple
// command it may run is taken out with its words after quote removal,
// and so are the commands that wrappers (env, nice, xargs, find -exec,
// sudo …), nested shells (sh -c STRING, a heredoc fed to sh), eval, trap
// and aliases run. A part of a word that is known only when the command
// runs (an expansion, a substitution, a glob) is a wildcard: ask and deny
// rules take it to be whatever would make them match, allow rules take
// it to be nothing they know. What the policy cannot see at all (a
// script read from a file or a pipe, eval of a computed string, a parse
// error) makes the whole command opaque: every ask and deny rule on
// commands matches it and no allow rule does.

const (
	// maxNesting bounds how deep nested scripts (sh -c, eval, aliases,
	// trap) are followed; deeper makes the command opaque.
	maxNesting = 8
	// maxFixes bounds how many "&>" the parser splits into "&" ">" (one
	// parse each); more makes the command opaque.
	maxFixes = 32
	// maxWrapping bounds how many wrappers deep a command is followed
	// (env nice timeout … rm).
	maxWrapping = 16
)

// segKind says what a part of a word is.
type segKind uint8

const (
	segLit   segKind = iota // known text
	segWild                 // unknown text, within one word
	segSplit                // unknown text that may split the word into several
)

// seg is a part of a word after quote removal.
type seg struct {
	kind segKind
	s    string // the text of a segLit
}

// word is one word of a simple command as the shell will see it after
// expansion.
type word struct {
	segs []seg
	// multi: the word may become any number of words (an unquoted
	// expansion, a glob), none included.
	multi bool
	// off is the offset of the word in its text.
	off int
}

// lit returns the word's text when it is fully known and one word.
func (w *word) lit() (string, bool) {
	if w.multi {
		return "", false
	}
	switch len(w.segs) {
	case 0:
		return "", true
	case 1:
		return w.segs[0].s, w.segs[0].kind == segLit
	}
	var b strings.Builder
	for _, s := range w.segs {
		if s.kind != segLit {
			return "", false
		}
		b.WriteString(s.s)
	}
	return b.String(), true
}

// known reports whether the word is fully known.
func (w *word) known() bool {
	_, ok := w.lit()
	return ok
}

func (w *word) addLit(s string) {
	if s == "" {
		return
	}
	if n := len(w.segs); n > 0 && w.segs[n-1].kind == segLit {
		w.segs[n-1].s += s
		return
	}
	w.segs = append(w.segs, seg{kind: segLit, s: s})
}

// pending holds the literal text of the word being taken out, so that a
// word of many quoted parts costs its length, not its length squared.
type pending struct {
	b strings.Builder
}

// flush appends the pending text to out.
func (p *pending) flush(out *word) {
	if p.b.Len() > 0 {
		out.addLit(p.b.String())
		p.b.Reset()
	}
}

// invocation is one simple command the shell may run.
type invocation struct {
	words []word
	// assigns: NAME=value words come before the command (or env's).
	assigns bool
	// wrapper: the command is a wrapper whose inner command was found
	// and follows it in script.cmds; allow rules look at that instead.
	wrapper bool
	// guess: a command a wrapper of unknown syntax may run (chroot DIR
	// CMD, su -c STRING); only ask and deny rules look at it.
	guess bool
	// start is the offset of its program (past assignments) in the
	// text it is rendered in.
	start int
	// depth counts the wrappers and aliases it is inside.
	depth int
}

// program returns the program word, nil for a command of assignments or
// redirections alone.
func (inv *invocation) program() *word {
	if len(inv.words) == 0 {
		return nil
	}
	return &inv.words[0]
}

// script is a shell command taken apart.
type script struct {
	// cmds holds every simple command the script may run.
	cmds []*invocation
	// texts holds the renderings regular expressions are tried on: the
	// script's and each nested script's.
	texts []*text
	// opaque, when set, says why part of what the script runs cannot be
	// known before it runs.
	opaque string
	// canon is the command's canonical form (the parse printed back),
	// what commandExact compares.
	canon string
}

// analyze takes cmd apart as dash will run it.
func analyze(cmd string) *script {
	sc := &script{canon: strings.TrimSpace(cmd)}
	if len(cmd) > api.MaxShellCommandBytes {
		sc.opaque = fmt.Sprintf("the command is longer than %d bytes", api.MaxShellCommandBytes)
		return sc
	}
	if strings.IndexByte(cmd, 0) >= 0 {
		sc.opaque = "the command holds a NUL byte"
		return sc
	}
	a := &analysis{sc: sc, budget: 4*len(cmd) + 4096, words: 8*len(cmd) + 1024, aliases: map[string]string{}, raw: cmd}
	if strings.IndexByte(cmd, '\r') >= 0 {
		// dash reads a carriage return as part of a word; the parser as
		// a blank. Parse it as a character of the private use area
		// that the command does not hold, and turn it back in words.
		for r := rune(0xE000); r <= 0xF8FF && a.cr == ""; r++ {
			if !strings.ContainsRune(cmd, r) {
				a.cr = string(r)
			}
		}
		if a.cr == "" {
			sc.opaque = "the command holds carriage returns and every character of the private use area"
			return sc
		}
	}
	f, err := a.parse(cmd, syntax.LangPOSIX)
	if err != nil {
		sc.opaque = "the command does not parse as /bin/sh reads it: " + err.Error()
		return sc
	}
	var b strings.Builder
	if syntax.NewPrinter().Print(&b, f) == nil {
		sc.canon = a.restore(strings.TrimSpace(b.String()))
	}
	a.file(f, syntax.LangPOSIX, 0)
	a.expandAliases()
	for _, t := range sc.texts {
		t.index()
	}
	return sc
}

// errTooManyFixes is the parse error of a command with more than
// maxFixes "&>".
var errTooManyFixes = errors.New(`too many "&>"`)

// parseShell parses src as lang. In the POSIX language it reads "&>" as
// dash does: "cmd &>file" is "cmd &" then ">file" (the parser, like
// bash, would read a redirection of both outputs, or refuse it).
func parseShell(src string, lang syntax.LangVariant) (*syntax.File, error) {
	for range maxFixes {
		f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(src), "")
		if err == nil {
			return f, nil
		}
		var le syntax.LangError
		if lang == syntax.LangPOSIX && errors.As(err, &le) {
			if off := int(le.Pos.Offset()); off+1 < len(src) && src[off] == '&' && src[off+1] == '>' {
				src = src[:off+1] + " " + src[off+1:]
				continue
			}
		}
		return nil, err
	}
	return nil, errTooManyFixes
}

// analysis is the state of one analyze call.
type analysis struct {
	sc *script
	// budget is how many bytes nested scripts may still parse, words
	// how many words the commands taken out may still hold: bounds that
	// keep the work linear in the command's length (wrappers of unknown
	// syntax and aliases copy words).
	budget, words int
	// aliases maps the names the command defines to their values.
	aliases map[string]string
	// guessing is set while the commands of a guess are taken out: they
	// are guesses too, and their opacity does not count.
	guessing int
	// raw is the command as given.
	raw string
	// expanded marks the (invocation, alias) pairs expanded.
	expanded map[aliasUse]bool
	// cr, when set, stands for a carriage return in what is parsed.
	cr string
}

// parse parses src as lang (see parseShell), with carriage returns read
// as dash reads them.
func (a *analysis) parse(src string, lang syntax.LangVariant) (*syntax.File, error) {
	if a.cr != "" {
		src = strings.ReplaceAll(src, "\r", a.cr)
	}
	return parseShell(src, lang)
}

// restore turns the stand-ins for carriage returns in s back.
func (a *analysis) restore(s string) string {
	if a.cr == "" {
		return s
	}
	return strings.ReplaceAll(s, a.cr, "\r")
}

type aliasUse struct {
	inv  *invocation
	name string
}

// opaque marks the script opaque for reason (the first reason stays).
func (a *analysis) opaque(reason string) {
	if a.guessing > 0 || a.sc.opaque != "" {
		return
	}
	a.sc.opaque = reason
}

// nested takes apart src, a script that the command runs (sh -c, eval,
// an alias, trap), in lang, at nesting depth; extra are words appended to
// its last simple command (an alias's arguments).
func (a *analysis) nested(src string, lang syntax.LangVariant, depth int, extra []word, what string) {
	if depth > maxNesting {
		a.opaque(what + " nests more than " + fmt.Sprint(maxNesting) + " scripts deep")
		return
	}
	if a.budget -= len(src); a.budget < 0 {
		a.opaque("the command's nested scripts are too long to follow")
		return
	}
	f, err := a.parse(src, lang)
	if err != nil {
		a.opaque(what + " does not parse: " + err.Error())
		return
	}
	if extra != nil && len(f.Stmts) > 0 {
		if c, ok := f.Stmts[len(f.Stmts)-1].Cmd.(*syntax.CallExpr); ok {
			a.file(f, lang, depth, withExtra{call: c, words: extra})
			return
		}
	}
	a.file(f, lang, depth)
}

// withExtra appends words to one call of a file (an alias's arguments).
type withExtra struct {
	call  *syntax.CallExpr
	words []word
}

// file takes apart a parsed script into a text of its own.
func (a *analysis) file(f *syntax.File, lang syntax.LangVariant, depth int, extra ...withExtra) {
	w := &walker{a: a, t: &text{}, lang: lang, depth: depth}
	if len(extra) > 0 {
		w.extra = extra[0]
	}
	w.stmts(f.Stmts, stdinInherited)
	w.finish()
}

// stdin says where a statement's standard input comes from, for a shell
// that reads its script from it.
type stdin struct {
	kind stdinKind
	body string // the heredoc's text, for stdinHeredoc
}

type stdinKind uint8

const (
	stdinInherited stdinKind = iota // the command's (empty for the shell tool)
	stdinPipe                       // a pipe, a file, or a heredoc with expansions
	stdinHeredoc                    // a heredoc whose text is known
)

// walker renders one script into its text and takes out its commands.
type walker struct {
	a     *analysis
	t     *text
	b     strings.Builder
	pend  pending // the literal text of the word being taken out
	lang  syntax.LangVariant
	depth int
	extra withExtra
}

func (w *walker) finish() {
	w.t.s = w.b.String()
	w.a.sc.texts = append(w.a.sc.texts, w.t)
}

func (w *walker) write(s string) { w.b.WriteString(s) }

// space writes a blank unless the text is empty or ends in one (and
// not in an unknown part).
func (w *walker) space() {
	n := w.b.Len()
	if len(w.t.wild) > 0 && w.t.wild[len(w.t.wild)-1] == n || n > 0 && w.b.String()[n-1] != ' ' {
		w.b.WriteByte(' ')
	}
}

func (w *walker) stmts(ss []*syntax.Stmt, in stdinKind) {
	for i, s := range ss {
		if i > 0 && !ss[i-1].Background {
			w.write("; ")
		}
		w.stmt(s, stdin{kind: in})
	}
}

func (w *walker) stmt(s *syntax.Stmt, in stdin) {
	if s.Negated {
		w.write("! ")
	}
	in = w.redirectedStdin(s.Redirs, in)
	switch c := s.Cmd.(type) {
	case nil:
		// Redirections alone: a command no allow rule matches.
		w.add(&invocation{start: w.b.Len()})
	case *syntax.CallExpr:
		w.call(c, in)
	default:
		w.command(c, in)
	}
	for _, r := range s.Redirs {
		w.redirect(r)
	}
	w.end()
	if s.Background {
		w.write(" & ")
	}
}

// redirectedStdin returns the standard input of a statement with redirs.
func (w *walker) redirectedStdin(redirs []*syntax.Redirect, in stdin) stdin {
	for _, r := range redirs {
		if r.N != nil && r.N.Value != "0" {
			continue
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			if body, ok := heredocText(r); ok {
				in = stdin{kind: stdinHeredoc, body: w.a.restore(body)}
			} else {
				in = stdin{kind: stdinPipe}
			}
		case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn, syntax.WordHdoc:
			in = stdin{kind: stdinPipe}
		}
	}
	return in
}

// end marks the end of a simple command in the text.
func (w *walker) end() { w.t.ends = append(w.t.ends, w.b.Len()) }

func (w *walker) add(inv *invocation) {
	if w.a.words -= len(inv.words) + 1; w.a.words < 0 {
		w.a.sc.opaque = cmp.Or(w.a.sc.opaque, "the command runs more commands than the policy follows")
		return
	}
	inv.guess = inv.guess || w.a.guessing > 0
	w.a.sc.cmds = append(w.a.sc.cmds, inv)
	w.t.starts = append(w.t.starts, inv.start)
}

func (w *walker) command(c syntax.Command, in stdin) {
	bashOnly := func(what string) {
		w.a.opaque("bash evaluates variables as code in " + what + ", which the policy cannot follow")
	}
	switch c := c.(type) {
	case *syntax.BinaryCmd:
		w.stmt(c.X, in)
		w.write(" " + c.Op.String() + " ")
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			in = stdin{kind: stdinPipe}
		}
		w.stmt(c.Y, in)
	case *syntax.Subshell:
		w.write("( ")
		w.stmts(c.Stmts, in.kind)
		w.write(" )")
	case *syntax.Block:
		w.write("{ ")
		w.stmts(c.Stmts, in.kind)
		w.write("; }")
	case *syntax.IfClause:
		for ic := c; ic != nil; ic = ic.Else {
			switch {
			case ic == c:
				w.write("if ")
			case len(ic.Cond) > 0:
				w.write("; elif ")
			default:
				w.write("; else ")
			}
			if len(ic.Cond) > 0 {
				w.stmts(ic.Cond, in.kind)
				w.write("; then ")
			}
			w.stmts(ic.Then, in.kind)
		}
		w.write("; fi")
	case *syntax.WhileClause:
		if c.Until {
			w.write("until ")
		} else {
			w.write("while ")
		}
		w.stmts(c.Cond, in.kind)
		w.write("; do ")
		w.stmts(c.Do, in.kind)
		w.write("; done")
	case *syntax.ForClause:
		switch l := c.Loop.(type) {
		case *syntax.WordIter:
			w.write("for " + l.Name.Value + " in")
			for _, it := range l.Items {
				w.space()
				w.word(it)
			}
		case *syntax.CStyleLoop:
			bashOnly("for ((…))")
		}
		w.write("; do ")
		w.stmts(c.Do, in.kind)
		w.write("; done")
	case *syntax.CaseClause:
		w.write("case ")
		w.word(c.Word)
		w.write(" in ")
		for _, it := range c.Items {
			for i, p := range it.Patterns {
				if i > 0 {
					w.write("|")
				}
				w.word(p)
			}
			w.write(") ")
			w.stmts(it.Stmts, in.kind)
			w.write(" ;; ")
		}
		w.write("esac")
	case *syntax.FuncDecl:
		if c.Name != nil {
			w.write(c.Name.Value)
		}
		w.write("() ")
		w.stmt(c.Body, in)
	case *syntax.TimeClause:
		w.write("time ")
		if c.Stmt != nil {
			w.stmt(c.Stmt, in)
		}
	case *syntax.CoprocClause:
		w.write("coproc ")
		w.stmt(c.Stmt, stdin{kind: stdinPipe})
	case *syntax.ArithmCmd:
		bashOnly("((…))")
	case *syntax.TestClause:
		bashOnly("[[…]]")
	case *syntax.LetClause:
		bashOnly("let")
	case *syntax.DeclClause:
		bashOnly(c.Variant.Value)
	default:
		w.a.opaque(fmt.Sprintf("the command uses a construct the policy does not follow (%T)", c))
	}
}

// call takes out a simple command.
func (w *walker) call(c *syntax.CallExpr, in stdin) {
	inv := &invocation{assigns: len(c.Assigns) > 0, depth: w.depth}
	w.space()
	if len(c.Assigns) > 0 {
		w.t.starts = append(w.t.starts, w.b.Len())
	}
	for _, as := range c.Assigns {
		w.space()
		w.assign(as)
	}
	if len(c.Assigns) > 0 && len(c.Args) > 0 {
		w.space()
	}
	inv.start = w.b.Len()
	for _, arg := range c.Args {
		w.space()
		inv.words = append(inv.words, w.word(arg))
	}
	if w.extra.call == c {
		for _, x := range w.extra.words {
			w.space()
			x.off = w.b.Len()
			w.renderWord(x)
			inv.words = append(inv.words, x)
		}
	}
	w.add(inv)
	w.expand(inv, in)
}

// renderWord writes a word taken from elsewhere (an alias's argument).
func (w *walker) renderWord(x word) {
	for _, s := range x.segs {
		if s.kind == segLit {
			w.write(s.s)
		} else {
			w.t.wild = append(w.t.wild, w.b.Len())
		}
	}
}

func (w *walker) assign(as *syntax.Assign) {
	if as.Name != nil {
		w.write(as.Name.Value)
	}
	if as.Index != nil {
		w.a.opaque("bash evaluates variables as code in array indexes, which the policy cannot follow")
	}
	w.write("=")
	if as.Value != nil {
		w.word(as.Value)
	}
	if as.Array != nil {
		for _, el := range as.Array.Elems {
			if el.Index != nil {
				w.a.opaque("bash evaluates variables as code in array indexes, which the policy cannot follow")
			}
			if el.Value != nil {
				w.space()
				w.word(el.Value)
			}
		}
	}
}

func (w *walker) redirect(r *syntax.Redirect) {
	w.space()
	if r.N != nil {
		w.write(r.N.Value)
	}
	w.write(r.Op.String())
	if r.Word != nil {
		w.word(r.Word)
	}
	if r.Hdoc != nil {
		// The body is not rendered; what it substitutes runs.
		w.substitutions(r.Hdoc)
	}
}

// heredocText returns the text of a heredoc when it has no expansions.
func heredocText(r *syntax.Redirect) (string, bool) {
	if r.Hdoc == nil {
		return "", true
	}
	quoted := false
	for _, p := range r.Word.Parts {
		switch p := p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			quoted = true
		case *syntax.Lit:
			quoted = quoted || strings.Contains(p.Value, `\`)
		}
	}
	var b strings.Builder
	for _, p := range r.Hdoc.Parts {
		l, ok := p.(*syntax.Lit)
		if !ok {
			return "", false
		}
		if quoted {
			b.WriteString(l.Value)
		} else {
			b.WriteString(unescape(l.Value, "$`\\\n"))
		}
	}
	return b.String(), true
}

// unescape removes the backslashes before the characters of special, as
// the shell does within double quotes and unquoted heredocs.
func unescape(s, special string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(special, s[i+1]) >= 0 {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// word renders a word and returns it after quote removal; the commands
// it substitutes are taken out.
func (w *walker) word(x *syntax.Word) word {
	out := word{off: w.b.Len()}
	w.parts(&out, x.Parts, false, true)
	w.pend.flush(&out)
	return out
}

// wild appends an unknown part to out.
func (w *walker) wild(out *word, kind segKind) {
	w.pend.flush(out)
	if n := len(out.segs); n == 0 || out.segs[n-1].kind == segLit || kind == segSplit {
		out.segs = append(out.segs, seg{kind: kind})
	}
	if kind == segSplit {
		out.multi = true
	}
	w.t.wild = append(w.t.wild, w.b.Len())
}

// lit adds known text to the word being taken out, and renders it.
func (w *walker) lit(s string) {
	s = w.a.restore(s)
	w.pend.b.WriteString(s)
	w.write(s)
}

// parts takes out the parts of a word into out: quoted within double
// quotes, first for the parts at the start of the word (where a tilde
// prefix may be).
func (w *walker) parts(out *word, parts []syntax.WordPart, quoted, first bool) {
	dollar := false // the part follows an unquoted $: bash's $'…' or $"…"
	for i, p := range parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := p.Value
			if !quoted && i+1 < len(parts) && strings.HasSuffix(v, "$") && !escaped(v, len(v)-1) {
				switch parts[i+1].(type) {
				case *syntax.SglQuoted, *syntax.DblQuoted:
					// dash reads a literal $ here; bash (some hosts'
					// /bin/sh) reads $'…' with escapes and $"…" as a
					// translation: unknown either way.
					v, dollar = v[:len(v)-1], true
				}
			}
			if quoted {
				w.lit(unescape(v, "$`\"\\\n"))
			} else {
				w.unquoted(out, v, first && i == 0)
			}
			continue
		case *syntax.SglQuoted:
			if p.Dollar || dollar {
				w.wild(out, segWild) // $'…': escapes not followed
			} else {
				w.lit(p.Value)
			}
		case *syntax.DblQuoted:
			if p.Dollar || dollar {
				w.substitutions(p)
				w.wild(out, segWild)
			} else {
				w.parts(out, p.Parts, true, false)
			}
		case *syntax.ParamExp:
			w.substitutions(p)
			if w.lang != syntax.LangPOSIX && (p.Index != nil || p.Slice != nil) {
				w.a.opaque("bash evaluates variables as code in ${a[i]} and ${a:i}, which the policy cannot follow")
			}
			kind := segWild
			if !quoted || p.Param != nil && p.Param.Value == "@" {
				kind = segSplit
			}
			w.wild(out, kind)
		case *syntax.CmdSubst:
			w.substitute(p.Stmts)
			w.wild(out, splitIf(!quoted))
		case *syntax.ArithmExp:
			w.substitutions(p.X)
			if w.lang != syntax.LangPOSIX {
				w.a.opaque("bash evaluates variables as code in $((…)), which the policy cannot follow")
			}
			w.wild(out, splitIf(!quoted))
		case *syntax.ProcSubst:
			w.substitute(p.Stmts)
			w.wild(out, segWild)
		default:
			w.wild(out, segSplit)
		}
		dollar = false
	}
}

// escaped reports whether the byte at i of the unquoted literal s is
// quoted by an odd number of backslashes before it.
func escaped(s string, i int) bool {
	n := 0
	for i--; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func splitIf(b bool) segKind {
	if b {
		return segSplit
	}
	return segWild
}

// unquoted adds an unquoted literal: backslashes quote the next
// character; *, ? and a bracket expression are globs (and so, in bash,
// is a brace); a leading ~ is the tilde prefix.
func (w *walker) unquoted(out *word, v string, first bool) {
	var b strings.Builder
	flush := func() {
		w.lit(b.String())
		b.Reset()
	}
	i := 0
	if first && strings.HasPrefix(v, "~") {
		j := strings.IndexByte(v, '/')
		if j < 0 {
			j = len(v)
		}
		if !strings.ContainsAny(v[:j], `\*?[`) {
			w.wild(out, segWild)
			i = j
		}
	}
	for ; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' && i+1 < len(v):
			i++
			b.WriteByte(v[i])
		case c == '*' || c == '?':
			flush()
			w.wild(out, segWild)
			out.multi = true
		case c == '{' && braceExpansion(v[i:]):
			// Brace expansion: bash's, and so that of a host whose
			// /bin/sh is bash; dash reads the braces as they are.
			flush()
			w.wild(out, segWild)
			out.multi = true
			i += strings.IndexByte(v[i:], '}')
		case c == '[' && strings.IndexByte(v[i+1:], ']') > 0:
			// A bracket expression stands for one character.
			flush()
			w.wild(out, segWild)
			out.multi = true
			i += 1 + strings.IndexByte(v[i+1:], ']')
		default:
			b.WriteByte(c)
		}
	}
	flush()
}

// braceExpansion reports whether s, which starts with {, starts a brace
// expansion: {a,b} or {1..3}.
func braceExpansion(s string) bool {
	end := strings.IndexByte(s, '}')
	return end > 0 && (strings.Contains(s[:end], ",") || strings.Contains(s[:end], ".."))
}

// substitute takes out the commands of a command substitution, in a
// text of their own.
func (w *walker) substitute(ss []*syntax.Stmt) {
	sub := &walker{a: w.a, t: &text{}, lang: w.lang, depth: w.depth}
	sub.stmts(ss, stdinInherited)
	sub.finish()
}

// substitutions takes out the commands substituted anywhere in node.
func (w *walker) substitutions(node syntax.Node) {
	if node == nil {
		return
	}
	syntax.Walk(node, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst:
			w.substitute(n.Stmts)
			return false
		case *syntax.ProcSubst:
			w.substitute(n.Stmts)
			return false
		}
		return true
	})
}
