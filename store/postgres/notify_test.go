package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"weft.dev/weft/store/postgres"
)

// TestNotifierWakesFollowers: a notifier on one store wakes the
// followers of a session when another store (another host) appends to
// it, and only those; when its connection is cut it reconnects and wakes
// every follower (a notice may have been lost meanwhile), and goes on
// delivering.
func TestNotifierWakesFollowers(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	a, b := openURL(t, url), openURL(t, url)
	n := postgres.NewNotifier(b, postgres.NotifierConfig{})
	defer n.Close()
	wake, stop := n.Follow("s")
	defer stop()
	other, stopOther := n.Follow("other")
	defer stopOther()
	woken := func(c <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up: %s", what)
		}
	}
	quiet := func(c <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-c:
			t.Fatalf("a wake-up: %s", what)
		default:
		}
	}
	// Connecting wakes every follower.
	woken(wake, "connected")
	woken(other, "connected")

	if err := a.Append(ctx, batch("s", 1, 2, "a")); err != nil {
		t.Fatal(err)
	}
	woken(wake, "after another store's append")
	quiet(other, "a follower of another session")

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var killed int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminate the notifier's connection: %d, %v", killed, err)
	}
	woken(other, "after the notifier reconnected")
	woken(wake, "after the notifier reconnected")
	if err := a.Append(ctx, batch("s", 3, 1, "a")); err != nil {
		t.Fatal(err)
	}
	woken(wake, "after an append once reconnected")
}
