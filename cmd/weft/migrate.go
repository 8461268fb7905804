package main

import (
	"context"
	"fmt"

	"weft.dev/weft/store/postgres"
)

// migrateCmd creates or upgrades the store's schema. A PostgreSQL store is
// shared by hosts that may run different versions of weft, so its schema
// changes only when someone runs this; a SQLite store migrates whenever it
// is opened.
type migrateCmd struct{}

func (migrateCmd) Run(ctx context.Context, a *app) error {
	cfg, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	loc, err := a.storeLocation(cfg)
	if err != nil {
		return err
	}
	if loc.url == "" {
		st, err := openStoreAt(ctx, loc)
		if err != nil {
			return err
		}
		st.Close()
		fmt.Fprintf(a.stdout, "%s: schema up to date (a SQLite store migrates when opened)\n", loc.name)
		return nil
	}
	from, to, err := postgres.Migrate(ctx, loc.url)
	if err != nil {
		return err
	}
	if from == to {
		fmt.Fprintf(a.stdout, "%s: schema version %d, up to date\n", loc.name, to)
	} else {
		fmt.Fprintf(a.stdout, "%s: schema version %d, migrated from %d\n", loc.name, to, from)
	}
	return nil
}
