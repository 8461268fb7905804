package postgres_test

import (
	"context"
	"fmt"
	"log"

	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
)

// A host opens the store on a database whose schema `weft migrate`
// (postgres.Migrate) created; an embedder that owns its database may let
// Open migrate instead. The example needs a server, so it only compiles.
func Example() {
	ctx := context.Background()
	url := "postgres://weft:secret@localhost:5432/weft?sslmode=disable"
	if _, _, err := postgres.Migrate(ctx, url); err != nil {
		log.Fatal(err) // names the host and what failed: refused, password, no database …
	}
	s, err := postgres.Open(ctx, postgres.Config{URL: url})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	sessions, err := s.Sessions(ctx, store.ListSessionsParams{Limit: 10})
	if err != nil {
		log.Fatal(err) // a storage failure while the server is away; retry
	}
	fmt.Println(len(sessions), "sessions")
}
