package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// hintAnswer is what to do without a host, for the commands that answer
// requests.
const hintAnswer = "requests are answered through `weft serve` (start it); a `weft run` on a terminal, or `weft`, answers its own as they come"

type approvalsCmd struct {
	Session string `short:"s" help:"List one session's requests." placeholder:"SESSION"`
	All     bool   `help:"Also list requests that were answered, expired or cancelled."`
	JSON    bool   `name:"json" help:"Print each request as one JSON line."`
}

func (c *approvalsCmd) Run(ctx context.Context, a *app) error {
	status := ""
	if c.All {
		status = "all"
	}
	var qs []record.Request
	res, err := hostCall(ctx, a, "weft approvals", api.RequestList, api.ListRequestsParams{SessionID: c.Session, Status: status, Limit: 1000})
	switch {
	case err == nil:
		qs = res.Requests
	case errors.Is(err, errNoHost):
		// No host: read the store (nothing can be answered without one).
		cfg, _, err := a.loadConfig()
		if err != nil {
			return err
		}
		st, _, err := a.openStore(ctx, cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		p := store.ListRequestsParams{SessionID: c.Session, Limit: 1000}
		if !c.All {
			p.Statuses = []string{record.RequestOpen}
		}
		if qs, err = st.Requests(ctx, p); err != nil {
			return err
		}
	default:
		return err
	}
	if c.JSON {
		for _, q := range qs {
			if err := printJSON(a, q); err != nil {
				return err
			}
		}
		return nil
	}
	if len(qs) == 0 {
		if c.All {
			fmt.Fprintln(a.stderr, "weft: no requests")
		} else {
			fmt.Fprintln(a.stderr, "weft: nothing waits for an answer")
		}
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	head := "ID\tSESSION\tRUN\tTOOL\tWHAT\tAGE"
	if c.All {
		head += "\tSTATUS"
	}
	fmt.Fprintln(tw, head)
	for _, q := range qs {
		tool := q.ToolCall.Name
		if q.Budget != nil {
			tool = "(budget)" // the host asks, not a tool
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", q.ID, q.SessionID, q.RunID, tool, clip(requestWhat(q), 60), age(q.CreatedAt))
		if c.All {
			st := q.Status
			if q.Decision != "" {
				st += " (" + q.Decision + ")"
			}
			fmt.Fprintf(tw, "\t%s", st)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// requestWhat is what a request asks, in a few words.
func requestWhat(q record.Request) string {
	if q.Kind == event.RequestInput {
		s := strconv.Quote(q.Question)
		if len(q.Choices) > 0 {
			var cs []string
			for i, c := range q.Choices {
				cs = append(cs, fmt.Sprintf("%d) %s", i+1, c))
			}
			s += " " + strings.Join(cs, " ")
		}
		return s
	}
	return callSummary(q.ToolCall)
}

// age is how long ago t was, roughly.
func age(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// answerHost is a client of the host to answer a request through, as
// name: each of its calls is one HTTP POST (postHost), whose error
// answerHostError explains.
func (a *app) answerHost(name string) (*client.Client, error) {
	cl, err := a.postHost(name)
	return cl, a.answerHostError(err)
}

// answerHostError is hostError for a command that answers: no host means
// nothing can answer, which hintAnswer says.
func (a *app) answerHostError(err error) error {
	err = a.hostError(err)
	if errors.Is(err, errNoHost) {
		return a.noHostError(hintAnswer, nil)
	}
	return err
}

// answerError says what went wrong with an answer and what to do.
func answerError(id string, err error) error {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.Kind {
	case api.KindAlreadyResolved:
		by, _ := ae.Data["resolvedBy"].(string)
		what, _ := ae.Data["decision"].(string)
		if what == "" {
			what, _ = ae.Data["status"].(string)
		}
		if by == "" {
			by = "another client"
		}
		return fmt.Errorf("%s was already answered by %s: %s", id, by, what)
	case api.KindNotFound:
		return fmt.Errorf("no request %s (see `weft approvals`)", id)
	}
	return err
}

type approveCmd struct {
	ID      string `arg:"" help:"The approval's ID (see weft approvals)."`
	Session bool   `help:"Allow such calls for the rest of the session, not only this one."`
	JSON    bool   `name:"json" help:"Print the request record as JSON."`
}

func (c *approveCmd) Run(ctx context.Context, a *app) error {
	d := event.DecisionAllowOnce
	if c.Session {
		d = event.DecisionAllowSession
	}
	return decideCmd(ctx, a, "weft approve", c.ID, d, "", c.JSON)
}

type denyCmd struct {
	ID      string `arg:"" help:"The approval's ID (see weft approvals)."`
	Message string `short:"m" help:"Why: the model reads it with the refusal." placeholder:"TEXT"`
	JSON    bool   `name:"json" help:"Print the request record as JSON."`
}

func (c *denyCmd) Run(ctx context.Context, a *app) error {
	return decideCmd(ctx, a, "weft deny", c.ID, event.DecisionDeny, c.Message, c.JSON)
}

func decideCmd(ctx context.Context, a *app, name, id, decision, message string, asJSON bool) error {
	cl, err := a.answerHost(name)
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := cl.DecideApproval(ctx, api.DecideParams{ApprovalID: id, Decision: decision, Message: message})
	if err != nil {
		return answerError(id, withFlags(strings.TrimPrefix(name, "weft "), a.answerHostError(err)))
	}
	if asJSON {
		return printJSON(a, r.Request)
	}
	fmt.Fprintf(a.stdout, "%s %s: %s %s\n", id, decisionWords(r.Decision), r.ToolCall.Name, clip(callSummary(r.ToolCall), 80))
	return nil
}

type answerCmd struct {
	ID   string `arg:"" help:"The question's ID (see weft approvals)."`
	Text string `arg:"" help:"The answer; a number picks that choice."`
	JSON bool   `name:"json" help:"Print the request record as JSON."`
}

func (c *answerCmd) Run(ctx context.Context, a *app) error {
	cl, err := a.answerHost("weft answer")
	if err != nil {
		return err
	}
	defer cl.Close()
	q, err := cl.GetRequest(ctx, api.RequestIDParams{RequestID: c.ID})
	if err != nil {
		return answerError(c.ID, a.answerHostError(err))
	}
	if q.Kind != event.RequestInput {
		return usageErr("%s is an approval of %s, not a question: use `weft approve %s` or `weft deny %s`", c.ID, q.ToolCall.Name, c.ID, c.ID)
	}
	p := api.AnswerParams{RequestID: c.ID, Text: c.Text}
	if n, err := strconv.Atoi(strings.TrimSpace(c.Text)); err == nil && len(q.Choices) > 0 {
		if n < 1 || n > len(q.Choices) {
			return usageErr("%s has choices 1 to %d: %d is not one", c.ID, len(q.Choices), n)
		}
		i := n - 1
		p.Choice, p.Text = &i, ""
	}
	r, err := cl.AnswerInput(ctx, p)
	if err != nil {
		return answerError(c.ID, a.answerHostError(err))
	}
	if c.JSON {
		return printJSON(a, r.Request)
	}
	fmt.Fprintf(a.stdout, "%s answered: %s\n", c.ID, clip(r.Message, 80))
	return nil
}
