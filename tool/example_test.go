package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"weft.dev/weft/tool"
)

func ExampleFunc() {
	type shoutArgs struct {
		Text string `json:"text" jsonschema:"the text to shout"`
	}
	shout, err := tool.Func("shout", "Upper-case some text.",
		func(ctx context.Context, call *tool.Call, in shoutArgs) (tool.Result, error) {
			return tool.Result{Output: strings.ToUpper(in.Text)}, nil
		})
	if err != nil {
		panic(err)
	}
	r := tool.NewRegistry()
	if err := r.Add(shout); err != nil {
		panic(err)
	}
	fmt.Println(string(r.Specs()[0].InputSchema))

	ctx := context.Background()
	res := r.Call(ctx, "shout", &tool.Call{Arguments: json.RawMessage(`{"text":"hello"}`)}, tool.CallOptions{})
	fmt.Printf("%+v\n", res)
	res = r.Call(ctx, "shout", &tool.Call{Arguments: json.RawMessage(`{"txt":"hello"}`)}, tool.CallOptions{})
	fmt.Printf("%+v\n", res)
	res = r.Call(ctx, "whisper", nil, tool.CallOptions{})
	fmt.Printf("%+v\n", res)
	// Output:
	// {"type":"object","properties":{"text":{"type":"string","description":"the text to shout"}},"required":["text"],"additionalProperties":false}
	// {Output:HELLO IsError:false Truncated:false Failure:<nil> Confinement: Attachments:[]}
	// {Output:tool "shout": invalid arguments: unexpected additional properties ["txt"] IsError:true Truncated:false Failure:<nil> Confinement: Attachments:[]}
	// {Output:unknown tool "whisper"; available tools: shout IsError:true Truncated:false Failure:<nil> Confinement: Attachments:[]}
}
