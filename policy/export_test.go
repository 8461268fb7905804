package policy

// MayRun is analyze for the tests of package policy_test: whether the
// analysis of cmd holds a simple command that may be argv (its program
// by name, in any directory; its unknown parts standing for any text, a
// word that may split for any number of words), and why the command is
// opaque, if it is.
func MayRun(cmd string) (func(argv []string) bool, string) {
	sc := analyze(cmd)
	return func(argv []string) bool {
		for _, inv := range sc.cmds {
			p := inv.program()
			if p == nil || len(argv) == 0 || !p.couldBeBase(base(argv[0])) {
				continue
			}
			if p.splits() || mayBe(inv.words[1:], argv[1:]) {
				return true
			}
		}
		return false
	}, sc.opaque
}

// mayBe reports whether words may expand to argv.
func mayBe(words []word, argv []string) bool {
	if len(words) == 0 {
		return len(argv) == 0
	}
	w := &words[0]
	if w.multi {
		for n := 0; n <= len(argv); n++ {
			if mayBe(words[1:], argv[n:]) {
				return true
			}
		}
		return false
	}
	return len(argv) > 0 && could(w.segs, argv[0]) && mayBe(words[1:], argv[1:])
}
