package postgres_test

import (
	"fmt"

	"weft.dev/weft/store/postgres"
)

// Name is how the store names its database in errors and logs: the
// server and the database, never the user or the password. A URL the
// driver cannot parse is an error, before any connection is tried.
func ExampleName() {
	for _, url := range []string{
		"postgres://weft:s3cret@db.internal:5432/weft?sslmode=require",
		"postgres://weft@db.internal/weft",
		"mysql://db.internal/weft",
	} {
		name, err := postgres.Name(url)
		if err != nil {
			fmt.Println("cannot parse:", url)
			continue
		}
		fmt.Println(name)
	}
	// Output:
	// postgres://db.internal:5432/weft
	// postgres://db.internal:5432/weft
	// cannot parse: mysql://db.internal/weft
}
