package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"weft.dev/weft/store"
)

// TestClassify: server errors a person must act on are explained and
// stay storage failures (no sentinel, so the host answers
// storage_unavailable), with the cause kept for errors.Is.
func TestClassify(t *testing.T) {
	for code, want := range map[string]string{
		"53100": "disk is full",
		"25006": "read-only",
		"57P01": "shutting down or restarting",
		"57P03": "shutting down or restarting",
		"08006": "connection to the database server failed",
		"42P01": "weft migrate",
		"28P01": "refused the login",
		"3D000": "does not exist",
	} {
		cause := &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"}
		err := classify("postgres://h:5432/d", "append to session s", fmt.Errorf("wrapped: %w", cause))
		for _, w := range []string{"postgres://h:5432/d", "append to session s", want, "SQLSTATE " + code} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not contain %q", code, err, w)
			}
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe != cause {
			t.Errorf("%s: the cause is lost", code)
		}
		for _, s := range []error{store.ErrNotFound, store.ErrSeqConflict, store.ErrInvalid, store.ErrReceiptExists, store.ErrClosed} {
			if errors.Is(err, s) {
				t.Errorf("%s: is %v", code, s)
			}
		}
	}
	if err := classify("n", "op", &pgconn.PgError{Code: "22021"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("22021 = %v; want ErrInvalid", err)
	}
}
