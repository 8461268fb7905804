package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"weft.dev/weft/event"
	"weft.dev/weft/internal/lineedit"
)

// answer is what a person answered to a request: a decision (with the
// message a deny carries) for an approval, a choice or a text for a
// question.
type answer struct {
	decision, message string
	choice            *int
	text              string
}

// words says a in a few words, for the line that records it under its
// call.
func (a answer) words(p *pending) string {
	if p.kind == event.RequestApproval {
		s := decisionWords(a.decision)
		if a.message != "" {
			s += ": " + strconv.Quote(clip(a.message, 80))
		}
		return s
	}
	if a.choice != nil {
		return fmt.Sprintf("answered %d) %s", *a.choice+1, p.choices[*a.choice])
	}
	return "answered " + strconv.Quote(clip(a.text, 80))
}

// asker asks one request, an approval or a question, and reads its
// answer: an approval takes one key (y, a or n; n then asks for a
// message to the model), a question a line of text or a choice's number.
// A key that is no answer says why in place. It is a part of a Bubble
// Tea model, used by one goroutine: the terminal UI's panel, and the
// prompt `weft run` shows on a terminal.
type asker struct {
	p *pending
	// waiting counts the other requests queued behind this one.
	waiting int
	// denying: n was pressed; the message to the model is typed.
	denying bool
	in      lineedit.Model
	// why says why the last key was no answer.
	why string
	// held: until then keys are no answers, the person having been
	// typing (a draft, during a run) when the request appeared; each key
	// before then holds them a while longer.
	held time.Time
	// heldKey is the last key held, shown while keys are held.
	heldKey string
}

// Holding answer keys: a request that appears while a person types (a
// draft during a run) takes no key as an answer until they pause, so
// that the "y" of a word typed on is never an approval.
const (
	// typingWindow: a key into the input this recently means typing.
	typingWindow = 2 * time.Second
	// holdAfterTyping is the pause that makes keys answers again.
	holdAfterTyping = 700 * time.Millisecond
)

// holdKeys makes keys no answers for a moment: the person was typing.
func (k *asker) holdKeys() { k.held = time.Now().Add(holdAfterTyping) }

// holding reports whether keys are held now.
func (k *asker) holding() bool { return time.Now().Before(k.held) }

// newAsker returns an asker of p.
func newAsker(p *pending) *asker {
	in := lineedit.New()
	in.SingleLine = true
	in.CharLimit = 4000
	k := &asker{p: p, in: in}
	if p.kind == event.RequestInput {
		k.in.Placeholder = "an answer"
		if len(p.choices) > 0 {
			k.in.Placeholder = "a number or an answer"
		}
		k.in.Focus()
	}
	return k
}

// typing reports whether the asker reads a line (a question's answer, a
// deny's message) rather than single keys.
func (k *asker) typing() bool { return k.p.kind == event.RequestInput || k.denying }

// key handles a key press and returns the answer when it completes one.
func (k *asker) key(msg tea.KeyPressMsg) (*answer, tea.Cmd) {
	k.why = ""
	if k.holding() {
		k.holdKeys()
		k.heldKey = msg.String()
		return nil, nil
	}
	if k.typing() {
		switch msg.String() {
		case "enter":
			return k.submit(), nil
		case "esc":
			if k.denying {
				k.denying = false
				k.in.Blur()
				k.in.SetValue("")
				return nil, nil
			}
		}
		var cmd tea.Cmd
		k.in, cmd = k.in.Update(msg)
		return nil, cmd
	}
	switch s := msg.String(); s {
	case "y", "Y":
		return &answer{decision: event.DecisionAllowOnce}, nil
	case "a", "A":
		if !k.p.offersAlways() {
			k.why = "“always” is not offered: a final rule of the host's config asks about this call; press y or n"
			return nil, nil
		}
		return &answer{decision: event.DecisionAllowSession}, nil
	case "n", "N":
		k.denying = true
		k.in.SetValue("")
		k.in.Placeholder = "a message to the model (Enter for none)"
		return nil, k.in.Focus()
	case "enter", "space":
		k.why = "press a key for your answer: " + k.choiceKeys()
	default:
		if msg.Text == "" {
			return nil, nil // a key that types nothing (an arrow, a function key)
		}
		k.why = fmt.Sprintf("%q is not an answer: press %s", s, k.choiceKeys())
	}
	return nil, nil
}

// paste handles pasted text: it goes into the line being typed.
func (k *asker) paste(msg tea.PasteMsg) tea.Cmd {
	if !k.typing() {
		k.why = "pasting is not an answer: press " + k.choiceKeys()
		return nil
	}
	var cmd tea.Cmd
	k.in, cmd = k.in.Update(msg)
	return cmd
}

// choiceKeys names the keys of an approval's answers.
func (k *asker) choiceKeys() string {
	if k.p.offersAlways() {
		return "y, a or n"
	}
	return "y or n"
}

// submit takes the line typed.
func (k *asker) submit() *answer {
	line := strings.TrimSpace(k.in.Value())
	if k.denying {
		return &answer{decision: event.DecisionDeny, message: line}
	}
	if line == "" {
		k.why = "type an answer"
		if len(k.p.choices) > 0 {
			k.why += fmt.Sprintf(", or a number from 1 to %d", len(k.p.choices))
		}
		return nil
	}
	if n, err := strconv.Atoi(line); err == nil && len(k.p.choices) > 0 {
		if n < 1 || n > len(k.p.choices) {
			k.why = fmt.Sprintf("there is no choice %d: type a number from 1 to %d, or an answer in words", n, len(k.p.choices))
			return nil
		}
		i := n - 1
		return &answer{choice: &i}
	}
	return &answer{text: line}
}

// theme holds the styles of the terminal UI (the terminal's own 16
// colours, so that a light or a dark background keeps them readable).
type theme struct {
	plain, bold, dim, ask, warn, ok, notice, user lipgloss.Style
}

func newTheme() theme {
	return theme{
		bold:   lipgloss.NewStyle().Bold(true),
		dim:    lipgloss.NewStyle().Faint(true),
		ask:    lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("3")),
		warn:   lipgloss.NewStyle().Foreground(lipgloss.Color("1")),
		ok:     lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		notice: lipgloss.NewStyle().Foreground(lipgloss.Color("6")),
		user:   lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("4")),
	}
}

// view renders the request and its prompt, wrapped at width.
func (k *asker) view(th theme, width int) string {
	var b strings.Builder
	p := k.p
	// The line typed fills the row after its prompt ("  answer › ").
	k.in.SetWidth(max(10, width-12))
	line := func(style lipgloss.Style, indent, s string) {
		for _, l := range wrapLines(s, width-len(indent)) {
			b.WriteString(indent + style.Render(l) + "\n")
		}
	}
	more := func() {
		if k.waiting > 0 {
			line(th.dim, "  ", fmt.Sprintf("%d more waiting", k.waiting))
		}
	}
	if p.kind == event.RequestApproval {
		line(th.ask, "", "? "+p.call.Name+" "+callSummary(p.call))
		more()
		if why := ruleSummary(p.rule); why != "" {
			line(th.dim, "  ", why)
		}
		if p.offersAlways() && p.always != nil {
			line(th.dim, "  ", "always for this session allows "+alwaysSummary(*p.always))
		} else if !p.offersAlways() {
			line(th.dim, "  ", "a final rule of the host's config asks: no “always” for this call")
		}
		if k.denying {
			line(th.plain, "  ", "message to the model (Enter for none, Esc goes back) ›")
			b.WriteString("  › " + k.in.View() + "\n")
		} else if p.offersAlways() {
			line(th.bold, "  ", "[y]es / [a]lways for this session / [n]o, with a message")
		} else {
			line(th.bold, "  ", "[y]es / [n]o, with a message")
		}
	} else {
		line(th.ask, "", "? "+p.question)
		more()
		for i, c := range p.choices {
			line(th.plain, "  ", fmt.Sprintf("%d) %s", i+1, c))
		}
		b.WriteString("  answer › " + k.in.View() + "\n")
	}
	switch {
	case k.holding() && k.heldKey != "":
		line(th.warn, "  ", fmt.Sprintf("you were typing as this was asked: %q is not taken; pause, then answer", k.heldKey))
	case k.holding():
		line(th.dim, "  ", "you were typing: keys answer after a pause")
	}
	if k.why != "" {
		line(th.warn, "  ", k.why)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// askProgram is the Bubble Tea model of the prompt `weft run` shows on a
// terminal for one request: it ends with the answer, or with Ctrl-C.
type askProgram struct {
	k           *asker
	th          theme
	width       int
	ans         *answer
	interrupted bool
}

func (m *askProgram) Init() tea.Cmd { return nil }

func (m *askProgram) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case tea.KeyPressMsg:
		if msg.String() == "ctrl+c" {
			m.interrupted = true
			return m, tea.Quit
		}
		ans, cmd := m.k.key(msg)
		if ans != nil {
			m.ans = ans
			return m, tea.Quit
		}
		return m, cmd
	case tea.PasteMsg:
		return m, m.k.paste(msg)
	}
	return m, nil
}

func (m *askProgram) View() tea.View {
	if m.ans != nil || m.interrupted {
		// What stays on the screen: the request, without its prompt;
		// the watcher prints the answer under it.
		k := *m.k
		k.why = ""
		// The trailing newline leaves the cursor below it.
		return tea.NewView(firstLines(k.view(m.th, max(m.width, 20)), 1) + "\n")
	}
	return tea.NewView(m.k.view(m.th, max(m.width, 20)))
}

// firstLines is the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
