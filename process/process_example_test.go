package process_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/process"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

// A Manager runs a shell command in the background of a session and logs
// its output in the store; the session (or the run that started it) waits
// for it by ID, and to every other session it does not exist.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "process-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	b, err := env.NewBinding(1, []event.Mount{{ID: "work", Path: dir, Mode: event.ModeReadWrite, Kind: event.KindLocal}})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	// A host also sets Sandbox, Tools, Notify and a Redactor.
	m, err := process.New(process.Config{Store: memory.New()})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	p, err := m.Start(ctx, process.StartParams{
		SessionID:   "ses_1",
		Kind:        record.ProcessShell,
		Command:     "echo building; echo done; exit 3",
		Binding:     b,
		Disposition: record.OwnerBound,
		CreatedBy:   "example",
	})
	if err != nil {
		panic(err)
	}
	owner := process.Caller{SessionID: "ses_1"}
	res, err := m.Await(ctx, p.ID, 10*time.Second, owner)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Process.Status, *res.Process.ExitCode)
	fmt.Print(res.Tail)

	// The whole log by offset, from 5 on: a reader resumes where it was.
	out, _ := m.Output(ctx, p.ID, 5, 0, owner)
	fmt.Printf("%q next %d ended %v\n", out.Data, out.Next, out.Ended)

	_, err = m.Get(ctx, p.ID, process.Caller{SessionID: "ses_2"})
	fmt.Println(errors.Is(err, process.ErrNotFound))
	// Output:
	// failed 3
	// building
	// done
	// "ing\ndone\n" next 14 ended true
	// true
}
