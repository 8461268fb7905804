package postgres_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
)

// frozenHelperEnv, set in the environment of this test binary, makes it
// the frozen owner of TestFrozenOwnerTakeover instead of running tests:
// its value is the database URL.
const frozenHelperEnv = "WEFT_TEST_FROZEN_OWNER"

// frozenTTL is the lease TTL of TestFrozenOwnerTakeover's hosts.
const frozenTTL = 2 * time.Second

// frozenOwner is the helper process: it leases session "s", appends its
// first event, then stops inside the transaction of its second append
// (the session's advisory lock held, the transaction idle), says so on
// stdout and waits to be stopped and killed.
func frozenOwner(url string) {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Println("FAIL", err)
		os.Exit(1)
	}
	st, err := postgres.Open(ctx, postgres.Config{URL: url, LeaseTTL: frozenTTL})
	if err != nil {
		fail(err)
	}
	ls, err := postgres.NewLeases(st, postgres.LeaseConfig{Holder: "frozen", TTL: frozenTTL})
	if err != nil {
		fail(err)
	}
	l, err := ls.Acquire(ctx, "s")
	if err != nil {
		fail(err)
	}
	b := batch("s", 1, 1, "frozen")
	b.Epoch = l.Epoch()
	if err := st.Append(ctx, b); err != nil {
		fail(err)
	}
	postgres.SetInTxHook(st, func(op string) {
		fmt.Println("IN APPEND", op)
		select {}
	})
	b = batch("s", 2, 1, "frozen")
	b.Epoch = l.Epoch()
	st.Append(ctx, b)
	fail(errors.New("the append returned"))
}

// TestFrozenOwnerTakeover: a host (a process of its own) is frozen by
// SIGSTOP inside an append, holding the session's advisory lock in a
// transaction it will never finish. Another host takes the session over
// within the lease TTL + 2 s (the frozen host's connection is cut by
// idle_in_transaction_session_timeout, which the store sets from the
// TTL, so its lock goes before its lease expires) and appends under its
// new epoch; the frozen host's half-done append never commits.
func TestFrozenOwnerTakeover(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	openURL(t, url) // migrates
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), frozenHelperEnv+"="+url)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "IN APPEND append to session s") {
		t.Fatalf("the helper says %q (%v); want IN APPEND", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()

	st, err := postgres.Open(ctx, postgres.Config{URL: url, LeaseTTL: frozenTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ls := newLeases(t, st, "taker", frozenTTL)
	deadline := stopped.Add(frozenTTL + 2*time.Second)
	var l store.Lease
	for {
		actx, cancel := context.WithDeadline(ctx, deadline)
		l, err = ls.Acquire(actx, "s")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the owner froze: the session is not taken over (%v); want within TTL %v + 2s", time.Since(stopped), err, frozenTTL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(stopped)
	t.Logf("taken over %v after the owner froze (TTL %v)", took.Round(time.Millisecond), frozenTTL)
	if l.Epoch() != 2 {
		t.Fatalf("epoch %d; want 2", l.Epoch())
	}
	b := batch("s", 2, 1, "taker")
	b.Epoch = l.Epoch()
	if err := st.Append(ctx, b); err != nil {
		t.Fatalf("the new owner's append: %v", err)
	}
	evs, err := st.Read(ctx, store.ReadParams{SessionID: "s"})
	if err != nil || len(evs) != 2 || writerOf(t, evs[1]) != "taker" {
		t.Fatalf("log %v (%v); want the frozen host's first event and the taker's", evs, err)
	}
}

// TestRenewalBesideAFullPool: every connection of a host's pool is taken
// (stuck sessions) for three TTLs; its lease renewals, on a connection
// of their own, keep its lease.
func TestRenewalBesideAFullPool(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	openURL(t, url)
	const ttl = 600 * time.Millisecond
	st, err := postgres.Open(ctx, postgres.Config{URL: url, LeaseTTL: ttl, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ls := newLeases(t, st, "busy", ttl)
	l, err := ls.Acquire(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	release, err := postgres.HoldConns(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
		release()
		t.Fatal("the lease was lost while the pool was full")
	case <-time.After(3 * ttl):
	}
	release()
	b := batch("s", 1, 1, "busy")
	b.Epoch = l.Epoch()
	if err := st.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
}
