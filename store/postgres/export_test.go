package postgres

import (
	"weft.dev/weft/store"
	"weft.dev/weft/store/internal/sqlstore"
)

// ReadQuery is the query of Store.Read and its arguments, for the test
// that explains its plans.
func ReadQuery(p store.ReadParams) (string, []any) { return sqlstore.ReadQuery(dialect(), p) }
