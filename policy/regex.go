package policy

import (
	"regexp/syntax"
	"sort"
	"unicode/utf8"
)

// maxRegexInsts bounds the compiled program of a rule's commandRegex, so
// that deciding costs at most maxRegexInsts steps per byte of command.
const maxRegexInsts = 4096

// commandRegex is a rule's commandRegex, compiled for a matcher of its
// own: a Pike VM that, in one pass over a rendering of a command, tries
// the expression at every position where a simple command starts, and
// can treat the parts of words that are known only when the command runs
// as "any text". Go's regexp can do neither: it tries an anchored
// expression at one position, an unanchored one at every position.
type commandRegex struct {
	prog *syntax.Prog
}

// compileCommandRegex compiles expr with the syntax and flags of
// regexp.Compile.
func compileCommandRegex(expr string) (*commandRegex, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, err
	}
	if len(prog.Inst) > maxRegexInsts {
		return nil, &syntax.Error{Code: syntax.ErrLarge, Expr: expr}
	}
	return &commandRegex{prog: prog}, nil
}

// text is a rendering of a command for regular expressions: each simple
// command's words after quote removal, separated by single spaces, with
// the operators between commands (" | ", " && ", "; " …). The parts of
// words that are known only when the command runs are not in s; wild
// holds their offsets.
type text struct {
	s string
	// wild holds the offsets in s of unknown parts, ascending.
	wild []int
	// starts and ends hold the offsets where a simple command (or its
	// program, past assignments and wrappers) starts, and where one
	// ends.
	starts, ends []int
	// at holds the flags of each offset (atStart, atEnd, atWild); set by
	// index.
	at []uint8
}

// known returns t without its unknown parts (taken as empty), to tell
// whether a match rests on them.
func (t *text) known() *text {
	k := *t
	k.wild = nil
	k.index()
	return &k
}

// Flags of a position of a text.
const (
	atStart = 1 << iota
	atEnd
	atWild
)

// index sorts t's positions and indexes them by offset.
func (t *text) index() {
	sort.Ints(t.wild)
	sort.Ints(t.starts)
	sort.Ints(t.ends)
	t.at = make([]uint8, len(t.s)+1)
	for _, p := range t.starts {
		t.at[p] |= atStart
	}
	for _, p := range t.ends {
		t.at[p] |= atEnd
	}
	for _, p := range t.wild {
		t.at[p] |= atWild
	}
}

// forbidden reports whether r is a character an unknown part of a word
// never stands for: the shell's operators. What an expansion produces is
// never parsed again, so an unknown word cannot make a pipe or a list.
func forbidden(r rune) bool {
	switch r {
	case '|', '&', ';', '<', '>', '(', ')', '`':
		return true
	}
	return false
}

// matchMode says how a commandRegex treats a text.
type matchMode int

const (
	// overMatch (ask and deny rules): the expression is tried at every
	// command start and may run to the end of the text; an unknown part
	// stands for any text without operators, and the assertions next to
	// it (\b, $ …) hold.
	overMatch matchMode = iota
	// underMatch (allow rules): the expression is tried at the start of
	// the text only, and must match before the first unknown part, with
	// the assertions next to it holding whatever it turns out to be.
	underMatch
)

// threads is a sparse set of instruction indexes.
type threads struct {
	dense  []uint32
	sparse []uint32
}

func newThreads(n int) *threads {
	return &threads{dense: make([]uint32, 0, n), sparse: make([]uint32, n)}
}

func (q *threads) has(pc uint32) bool {
	i := q.sparse[pc]
	return int(i) < len(q.dense) && q.dense[i] == pc
}

func (q *threads) add(pc uint32) {
	q.sparse[pc] = uint32(len(q.dense))
	q.dense = append(q.dense, pc)
}

func (q *threads) clear() { q.dense = q.dense[:0] }

// vm runs one commandRegex over one text.
type vm struct {
	prog      *syntax.Prog
	cur, next *threads
	stack     []uint32
	matched   bool
}

// match reports whether re matches t as mode says: in overMatch at any
// of t's starts (and at 0), in underMatch at 0 only. It costs
// O(len(t.s) × len(re.prog.Inst)).
func (re *commandRegex) match(t *text, mode matchMode) bool {
	n := len(re.prog.Inst)
	m := &vm{prog: re.prog, cur: newThreads(n), next: newThreads(n)}
	for pos := 0; ; {
		ctx := t.context(pos, mode)
		if pos == 0 || mode == overMatch && t.isStart(pos) {
			m.addThread(m.cur, uint32(m.prog.Start), ctx)
		}
		if t.isWild(pos) {
			if mode == underMatch {
				return m.matched // the match must end before the unknown
			}
			m.wildcard()
		}
		if m.matched {
			return true
		}
		if pos >= len(t.s) || len(m.cur.dense) == 0 && (mode == underMatch || !t.startsAfter(pos)) {
			return false
		}
		r, w := utf8.DecodeRuneInString(t.s[pos:])
		pos += w
		m.step(r, t.context(pos, mode))
	}
}

// context returns the assertions that hold at pos of t.
func (t *text) context(pos int, mode matchMode) syntax.EmptyOp {
	prev, next := rune(-1), rune(-1)
	if pos > 0 {
		prev, _ = utf8.DecodeLastRuneInString(t.s[:pos])
	}
	if pos < len(t.s) {
		next, _ = utf8.DecodeRuneInString(t.s[pos:])
	}
	ctx := syntax.EmptyOpContext(prev, next)
	if t.isWild(pos) {
		if mode == overMatch {
			return ^syntax.EmptyOp(0)
		}
		// Whatever comes next: a word character or not, never the end.
		ctx = syntax.EmptyOpContext(prev, 'a') & syntax.EmptyOpContext(prev, ' ')
	} else if t.isEnd(pos) {
		ctx |= syntax.EmptyEndLine | syntax.EmptyEndText
	}
	if pos == 0 || mode == overMatch && t.isStart(pos) {
		ctx |= syntax.EmptyBeginLine | syntax.EmptyBeginText
	}
	return ctx
}

func (t *text) isStart(pos int) bool { return t.at[pos]&atStart != 0 }
func (t *text) isEnd(pos int) bool   { return t.at[pos]&atEnd != 0 }
func (t *text) isWild(pos int) bool  { return t.at[pos]&atWild != 0 }

// startsAfter reports whether a command starts after pos.
func (t *text) startsAfter(pos int) bool {
	return len(t.starts) > 0 && t.starts[len(t.starts)-1] > pos
}

// addThread adds pc and what it reaches without consuming input under
// the assertions ctx allows to q; it notes a match.
func (m *vm) addThread(q *threads, pc uint32, ctx syntax.EmptyOp) {
	m.stack = append(m.stack[:0], pc)
	for len(m.stack) > 0 {
		pc := m.stack[len(m.stack)-1]
		m.stack = m.stack[:len(m.stack)-1]
		if q.has(pc) {
			continue
		}
		q.add(pc)
		inst := &m.prog.Inst[pc]
		switch inst.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			m.stack = append(m.stack, inst.Arg, inst.Out)
		case syntax.InstCapture, syntax.InstNop:
			m.stack = append(m.stack, inst.Out)
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(inst.Arg)&^ctx == 0 {
				m.stack = append(m.stack, inst.Out)
			}
		case syntax.InstMatch:
			m.matched = true
		}
	}
}

// step consumes r: the threads that match it move on, under nctx (the
// context after r).
func (m *vm) step(r rune, nctx syntax.EmptyOp) {
	m.next.clear()
	for _, pc := range m.cur.dense {
		inst := &m.prog.Inst[pc]
		switch inst.Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			if inst.MatchRune(r) {
				m.addThread(m.next, inst.Out, nctx)
			}
		}
	}
	m.cur, m.next = m.next, m.cur
}

// wildcard lets the current threads consume any text without operators:
// it adds every instruction they reach that way, with every assertion
// holding.
func (m *vm) wildcard() {
	all := ^syntax.EmptyOp(0)
	for i := 0; i < len(m.cur.dense); i++ { // the set grows as we go
		inst := &m.prog.Inst[m.cur.dense[i]]
		switch inst.Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			if matchesSomeAllowed(inst) {
				m.addThread(m.cur, inst.Out, all)
			}
		}
	}
}

// matchesSomeAllowed reports whether inst matches some rune that is not
// forbidden.
func matchesSomeAllowed(inst *syntax.Inst) bool {
	switch inst.Op {
	case syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
		return true
	case syntax.InstRune1:
		return !forbidden(inst.Rune[0])
	}
	rs := inst.Rune
	if len(rs) == 1 {
		return !forbidden(rs[0]) || syntax.Flags(inst.Arg)&syntax.FoldCase != 0
	}
	for i := 0; i+1 < len(rs); i += 2 {
		lo, hi := rs[i], rs[i+1]
		if hi-lo > 8 {
			return true
		}
		for r := lo; r <= hi; r++ {
			if !forbidden(r) {
				return true
			}
		}
	}
	return false
}
