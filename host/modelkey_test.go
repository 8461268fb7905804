package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/config"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

// keylessHost resolves models as the CLI does, in an environment with no
// API key; "fast" is a scripted model that needs none.
func keylessHost(t *testing.T, defaultModel string) *host.Host {
	t.Helper()
	h, err := host.New(context.Background(), host.Config{
		Store: memory.New(), DefaultModel: defaultModel, CoalesceWindow: 2 * time.Millisecond,
		ResolveModel: func(name string) (*host.Model, error) {
			if name == "fast" {
				p, err := scripted.Parse(name, []byte(scripts["fast"]))
				return &host.Model{Name: name, Provider: p, Model: name}, err
			}
			m, err := config.Resolve(name, config.File{}, "config.json", func(string) string { return "" })
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: m.Name, Provider: m.Provider, Model: m.Model}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// missingKey checks that err refuses field model for want, the variable
// of a missing API key.
func missingKey(t *testing.T, what string, err error, want string) {
	t.Helper()
	var ae *api.Error
	if !errors.Is(err, api.ErrInvalidParams) || !errors.As(err, &ae) || ae.Data["env"] != want || ae.Data["field"] != "model" ||
		!strings.Contains(ae.Message, want) {
		t.Errorf("%s: %v (data %v)", what, err, ae)
	}
}

// A model whose API key the host lacks is refused where it is named
// (session/create, session/update, run/start) and where it is implied (a
// run of a session without a model, on a host whose default lacks its
// key), with the variable to set in data.env; nothing is written.
func TestMissingAPIKey(t *testing.T) {
	ctx := context.Background()
	h := keylessHost(t, "openai:gpt-x")
	_, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "anthropic:claude-x"})
	missingKey(t, "session/create", err, "ANTHROPIC_API_KEY")

	s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "fast", Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: s.ID, Model: ptr("anthropic:claude-x")})
	missingKey(t, "session/update", err, "ANTHROPIC_API_KEY")
	_, err = h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("hi"), Model: "openai:gpt-x"})
	missingKey(t, "run/start naming the model", err, "OPENAI_API_KEY")
	if got := wait(t, h, start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("hi")}).ID); got.Status != record.RunCompleted {
		t.Fatalf("a run of the session's model: %+v", got)
	}

	// A session without a model runs the host's default, which lacks its key.
	s2, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s2.ID})
	_, err = h.StartRun(ctx, api.StartRunParams{SessionID: s2.ID, Input: input("hi"), IdempotencyKey: "k"})
	missingKey(t, "run/start with the host's default", err, "OPENAI_API_KEY")
	after, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s2.ID})
	runs, _ := h.ListRuns(ctx, api.ListRunsParams{SessionID: s2.ID})
	if len(after.Events) != len(before.Events) || len(runs.Runs) != 0 {
		t.Fatalf("a refused run/start wrote %d events and %d runs", len(after.Events)-len(before.Events), len(runs.Runs))
	}
	// Naming a model the host can use runs.
	if got := wait(t, h, start(t, h, api.StartRunParams{SessionID: s2.ID, Input: input("hi"), Model: "fast", IdempotencyKey: "k"}).ID); got.Status != record.RunCompleted {
		t.Fatalf("run: %+v", got)
	}
}

// model/check says which model a run would use (named, the session's, the
// host's default) and refuses one the host cannot use with the error
// run/start would return, writing nothing.
func TestCheckModel(t *testing.T) {
	ctx := context.Background()
	h := keylessHost(t, "openai:gpt-x")
	_, err := h.CheckModel(ctx, api.ModelCheckParams{})
	missingKey(t, "the host's default", err, "OPENAI_API_KEY")
	_, err = h.CheckModel(ctx, api.ModelCheckParams{Model: "anthropic:claude-x"})
	missingKey(t, "named", err, "ANTHROPIC_API_KEY")
	res, err := h.CheckModel(ctx, api.ModelCheckParams{Model: "fast"})
	if err != nil || res.Model != "fast" || res.Source != api.ModelFromParams {
		t.Fatalf("named fast: %+v %v", res, err)
	}
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	res, err = h.CheckModel(ctx, api.ModelCheckParams{SessionID: s.ID})
	if err != nil || res.Model != "fast" || res.Source != api.ModelFromSession {
		t.Fatalf("the session's: %+v %v", res, err)
	}
	if _, err := h.CheckModel(ctx, api.ModelCheckParams{SessionID: "ses_missing"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	if _, err := h.CheckModel(ctx, api.ModelCheckParams{Model: strings.Repeat("m", api.MaxModelBytes+1)}); !errors.Is(err, api.ErrInvalidParams) {
		t.Fatalf("oversized model: %v", err)
	}
	res, err = keylessHost(t, "fast").CheckModel(ctx, api.ModelCheckParams{})
	if err != nil || res.Model != "fast" || res.Source != api.ModelFromDefault {
		t.Fatalf("the default: %+v %v", res, err)
	}
}
