package policy

import (
	"strings"
)

// commandPattern is a rule's Match.Command, compiled.
type commandPattern struct {
	// words are the rule's words: the program, then its arguments.
	words []string
	// seq are the words past the program that ask and deny rules look
	// for in order, and letters the letters of the short options among
	// them (-rf), which they look for in any option of the command.
	seq     []string
	letters string
}

func compileCommand(s string) *commandPattern {
	cp := &commandPattern{words: strings.Fields(s)}
	if len(cp.words) == 0 {
		return cp
	}
	for _, w := range cp.words[1:] {
		if isShortOptions(w) {
			cp.letters += w[1:]
		} else {
			cp.seq = append(cp.seq, w)
		}
	}
	return cp
}

// isShortOptions reports whether s is a cluster of short options: -r,
// -rf.
func isShortOptions(s string) bool {
	if len(s) < 2 || s[0] != '-' || s[1] == '-' {
		return false
	}
	for _, c := range s[1:] {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// allows reports whether the allow rule cp matches inv: the command is
// known, has no assignments in front, and begins with the rule's words
// exactly, its program named as the rule names it (git, not /usr/bin/git
// or ./git).
func (cp *commandPattern) allows(inv *invocation) bool {
	if inv.assigns || len(inv.words) < len(cp.words) {
		return false
	}
	for i, r := range cp.words {
		if s, ok := inv.words[i].lit(); !ok || s != r {
			return false
		}
	}
	return true
}

// catches reports whether the ask or deny rule cp may match inv, and
// whether that rests on a part of it known only when it runs: a program
// that may be the rule's (by its name, whatever its directory), and the
// rule's other words in order among its arguments (options and other
// words between them skipped), its short options' letters among the
// command's short options.
func (cp *commandPattern) catches(inv *invocation) (match, unknown bool) {
	p := inv.program()
	if p == nil || !p.couldBeBase(base(cp.words[0])) {
		return false, false
	}
	unknown = !p.known()
	if p.splits() {
		return true, true // its other fields may be any words
	}
	k, letters := 0, cp.letters
	options := true
	for i := 1; i < len(inv.words); i++ {
		a := &inv.words[i]
		if a.splits() {
			return true, true
		}
		for k < len(cp.seq) && a.couldBe(cp.seq[k]) {
			unknown = unknown || !a.known()
			k++
			if !a.multi {
				break
			}
		}
		if letters == "" {
			continue
		}
		s, ok := a.lit()
		switch {
		case !ok:
			letters, unknown = "", true
		case s == "--":
			options = false
		case options && isShortOptions(s):
			letters = strings.Map(func(c rune) rune {
				if strings.ContainsRune(s[1:], c) {
					return -1
				}
				return c
			}, letters)
		}
	}
	return k == len(cp.seq) && letters == "", unknown
}

// splits reports whether the word has an unquoted expansion, which may
// split it into any words.
func (w *word) splits() bool {
	for _, s := range w.segs {
		if s.kind == segSplit {
			return true
		}
	}
	return false
}

// couldBe reports whether the word may be r: equal to it, or for a long
// option (--force), also --force=value.
func (w *word) couldBe(r string) bool {
	if could(w.segs, r) {
		return true
	}
	if !strings.HasPrefix(r, "--") || len(r) <= 2 {
		return false
	}
	if s, ok := w.lit(); ok {
		return strings.HasPrefix(s, r+"=")
	}
	return true // an unknown part may make it --force=…
}

// couldBeBase reports whether the word, as a program, may name a
// program called name: the part after its last slash may be name.
func (w *word) couldBeBase(name string) bool {
	segs := w.segs
	for i, s := range segs {
		if s.kind == segSplit {
			// The first field ends somewhere in this part.
			segs = append(segs[:i:i], seg{kind: segWild})
			break
		}
	}
	last, cut := -1, 0
	for i, s := range segs {
		if s.kind == segLit {
			if j := strings.LastIndexByte(s.s, '/'); j >= 0 {
				last, cut = i, j+1
			}
		}
	}
	tail := segs
	if last >= 0 {
		tail = append([]seg{{kind: segLit, s: segs[last].s[cut:]}}, segs[last+1:]...)
	}
	if could(tail, name) {
		return true
	}
	// An unknown part may hold a slash: the name may start within it.
	for i := last + 1; i < len(segs); i++ {
		if segs[i].kind != segLit && could(segs[i:], name) {
			return true
		}
	}
	return false
}

// could reports whether some value of segs, its unknown parts any text,
// equals s.
func could(segs []seg, s string) bool {
	si, pi := 0, 0
	star, mark := -1, 0
	for {
		switch {
		case pi < len(segs) && segs[pi].kind != segLit:
			star, mark = pi, si
			pi++
		case pi < len(segs) && strings.HasPrefix(s[si:], segs[pi].s):
			si += len(segs[pi].s)
			pi++
		case pi == len(segs) && si == len(s):
			return true
		case star >= 0 && mark < len(s):
			mark++
			si, pi = mark, star+1
		default:
			return false
		}
	}
}

// render returns the invocation's words as a text of their own, for an
// allow rule's regular expression.
func (inv *invocation) render() *text {
	t := &text{}
	var b strings.Builder
	for i, x := range inv.words {
		if i > 0 {
			b.WriteByte(' ')
		}
		for _, s := range x.segs {
			if s.kind == segLit {
				b.WriteString(s.s)
			} else {
				t.wild = append(t.wild, b.Len())
			}
		}
	}
	t.s = b.String()
	t.starts, t.ends = []int{0}, []int{len(t.s)}
	t.index()
	return t
}

// counted returns the commands allow rules look at: all but the
// wrappers whose inner command follows, and the guesses.
func (sc *script) counted(yield func(*invocation) bool) {
	for _, inv := range sc.cmds {
		if inv.wrapper || inv.guess {
			continue
		}
		if !yield(inv) {
			return
		}
	}
}

// allowedBy reports whether every command of the script satisfies ok,
// there is at least one, and nothing of the script is opaque: the
// quantifier of allow rules.
func (sc *script) allowedBy(ok func(*invocation) bool) bool {
	if sc.opaque != "" {
		return false
	}
	n := 0
	for inv := range sc.counted {
		if !ok(inv) {
			return false
		}
		n++
	}
	return n > 0
}

// Details of a match that rests on what the policy cannot see.
const (
	detailUnknown = "part of the command is known only when it runs, so the policy assumes it may be what the rule names"
)

// caughtBy reports whether some command of the script may satisfy ok,
// or the script is opaque: the quantifier of ask and deny rules. detail
// says why, when the match rests on what the policy cannot see.
func (sc *script) caughtBy(ok func(*invocation) (bool, bool)) (bool, string) {
	if sc.opaque != "" {
		return true, sc.opaque
	}
	found := false
	for _, inv := range sc.cmds {
		m, unknown := ok(inv)
		if m && !unknown {
			return true, ""
		}
		found = found || m
	}
	if found {
		return true, detailUnknown
	}
	return false, ""
}
