package agent_test

import (
	"context"
	"fmt"

	"weft.dev/weft/agent"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
)

// ExampleCompact summarises a conversation, as the loop does before a
// step that would overflow the model's window, and shows what the model
// is sent afterwards: the summary with the re-injected state.
func ExampleCompact() {
	p, err := scripted.Parse("example.json", []byte(`{"summary":"The user greeted the agent.","steps":[{"text":"hi"}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := agent.Compact(context.Background(), agent.CompactParams{
		Model: &agent.Model{Name: "scripted:example", Provider: p, Model: "example"},
		History: []llm.Message{
			{Role: llm.RoleUser, Content: "hello"},
			{Role: llm.RoleAssistant, Content: "hi"},
		},
		State: "Live background processes: none",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range agent.CompactedMessages(d) {
		fmt.Println(m.Role)
		fmt.Println(m.Content)
	}
	// Output:
	// user
	// [The conversation before this point was compacted to save context. Summary of it:]
	//
	// The user greeted the agent.
	// [scripted summary of 1 turns]
	//
	// Live background processes: none
}
