package rpc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"weft.dev/weft/api"
)

// The api.Host contract holds for the Go client as for the host in this
// process: a subscription that the host ends because it shuts down ends,
// on the client's side too, with an error of kind overloaded (so that
// code written against api.Host, and rpc serving a client, tells a
// shutdown from a failure).
func TestClientSubscriptionEndsOverloadedOnShutdown(t *testing.T) {
	e := newHostEnv(t)
	c := e.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	var end error
	for _, err := range seq {
		if err != nil {
			end = err
			break
		}
		// The replay's first event is in: shut the host down.
		go e.h.Close()
	}
	if !errors.Is(end, api.ErrOverloaded) {
		t.Fatalf("the subscription ended with %v (%T); want an error of kind overloaded", end, end)
	}
}
