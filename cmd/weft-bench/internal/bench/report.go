package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// WriteTable prints the report as a table (figure, result, target,
// verdict), followed by the notes of the rows that have one.
func (r *Report) WriteTable(w io.Writer) error {
	m := r.Machine
	var head strings.Builder
	fmt.Fprintf(&head, "# %d CPUs", m.CPUs)
	if m.CPU != "" {
		fmt.Fprintf(&head, " (%s)", m.CPU)
	}
	if m.Kernel != "" {
		fmt.Fprintf(&head, ", kernel %s", m.Kernel)
	}
	fmt.Fprintf(&head, ", %s", m.Go)
	if m.Weft != "" {
		fmt.Fprintf(&head, ", %s", m.Weft)
	}
	if m.Codex != "" {
		fmt.Fprintf(&head, ", %s", m.Codex)
	}
	fmt.Fprintf(&head, "\n# load average %s at the start, %s at the end; %s in all", m.LoadStart, m.LoadEnd, fmtDur(r.Duration))
	if r.Quick {
		head.WriteString("; QUICK counts: the figures are not comparable with the targets")
	}
	head.WriteString("\n")
	rows := [][]string{{"figure", "result", "target", "verdict"}}
	var notes []string
	for _, res := range r.Results {
		v := string(res.Verdict)
		if res.Note != "" {
			notes = append(notes, res.Note)
			v += fmt.Sprintf(" [%d]", len(notes))
		}
		rows = append(rows, []string{res.Name, res.Result, res.Target, v})
	}
	width := make([]int, 4)
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	b.WriteString(head.String())
	for _, row := range rows {
		for i, c := range row {
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteString("\n")
	}
	for i, n := range notes {
		fmt.Fprintf(&b, "[%d] %s\n", i+1, n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
