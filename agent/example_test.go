package agent_test

import (
	"context"
	"fmt"
	"strings"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
	"weft.dev/weft/llm/scripted"
)

// printLog is the smallest agent.Log: it numbers events and prints their
// types; deltas are collected as text.
type printLog struct {
	seq  int64
	text strings.Builder
}

func (l *printLog) Append(_ context.Context, evs ...event.Event) ([]event.Event, error) {
	for i := range evs {
		l.seq++
		evs[i].Seq = l.seq
		fmt.Println(evs[i].Type)
	}
	return evs, nil
}

func (l *printLog) Delta(_ context.Context, _ string, _ event.Type, _ int, text string) error {
	l.text.WriteString(text)
	return nil
}

// Execute runs one run against the offline scripted model; a real host
// passes a journal that makes every event durable first.
func ExampleExecute() {
	model, _ := scripted.Parse("example.json", []byte(`{"steps":[{"text":"Hi, {{input}}."}]}`))
	log := &printLog{}
	out, err := agent.Execute(context.Background(), agent.Config{Provider: model, Model: "example"}, log,
		agent.Run{ID: "run_1", SessionID: "ses_1", ModelName: "scripted:example", Input: event.TextParts("Ada")})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Type, log.text.String())
	// Output:
	// run.started
	// message.user
	// step.started
	// message.completed
	// usage
	// run.completed
	// run.completed Hi, Ada.
}
