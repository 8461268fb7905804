package postgres_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"weft.dev/weft/internal/pgtest"
	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
	"weft.dev/weft/store/storetest"
)

// pg is the cluster the tests of this package share; each test gets a
// database of its own.
var pg pgtest.Shared

func TestMain(m *testing.M) {
	if url := os.Getenv(frozenHelperEnv); url != "" {
		frozenOwner(url)
		return
	}
	code := m.Run()
	if err := pg.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close the test cluster:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// open opens a store on a new database of the shared cluster, migrated.
func open(t testing.TB) *postgres.Store {
	t.Helper()
	return openURL(t, pg.Database(t))
}

func openURL(t testing.TB, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), postgres.Config{URL: url, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
}

func TestConformanceLeases(t *testing.T) {
	storetest.RunLeases(t, func(t *testing.T) store.Store { return open(t) })
}
