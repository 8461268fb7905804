package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"

	"weft.dev/weft/store/internal/sqlstore"
)

// writerReads are the store's reads on the writer's connection, for a
// store opened with [Config.ReadOnWriter]: each query runs under the
// writer's lock, between its transactions, and a query's rows are copied
// out before the lock is released, so no read holds the lock while its
// caller iterates (or reads again), and an append waits for a read at
// most as long as the query runs.
type writerReads struct{ s *Store }

// Query runs query on the writer's connection and returns its rows,
// copied.
func (r writerReads) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	var out *copiedRows
	err := r.s.w.read(ctx, func(c *wconn) error {
		rows, err := c.conn.QueryContext(context.WithoutCancel(ctx), query, args...)
		if err != nil {
			return err
		}
		out, err = copyRows(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// QueryRow returns the row of query, which it runs on the writer's
// connection when the row is scanned.
func (r writerReads) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return sqlstore.RowFunc(func(dest ...any) error {
		return r.s.w.read(ctx, func(c *wconn) error {
			return c.conn.QueryRowContext(context.WithoutCancel(ctx), query, args...).Scan(dest...)
		})
	})
}

func (r writerReads) Error(op string, err error) error { return r.s.errorf(op, err) }

// read runs fn, which reads, on the writer's connection under its lock,
// opening the connection if there is none. ctx is checked once, before;
// fn must not let the driver watch it (a cancel arriving late would
// interrupt the connection's next statement, a write's): see
// [writer.run]. A read is no write: the idle checkpointer does not count
// it.
func (w *writer) read(ctx context.Context, fn func(c *wconn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c, err := w.connLocked(ctx)
	if err != nil {
		return err
	}
	return fn(c)
}

// copiedRows are the rows of a query, copied out of the driver: each
// column of each row is the driver's value (int64, float64, string,
// []byte or nil; a []byte is a copy), which Scan converts.
type copiedRows struct {
	rows [][]any
	cur  []any
	err  error
}

// copyRows reads and closes rows.
func copyRows(rows *sql.Rows) (*copiedRows, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	ptrs := make([]any, len(cols))
	vals := make([]any, len(cols))
	for i := range ptrs {
		ptrs[i] = &vals[i]
	}
	out := &copiedRows{}
	for rows.Next() {
		// Scanning into *any copies a []byte (database/sql's rule).
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out.rows = append(out.rows, append([]any(nil), vals...))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Next moves to the next row and reports whether there is one.
func (r *copiedRows) Next() bool {
	if len(r.rows) == 0 {
		r.cur = nil
		return false
	}
	r.cur, r.rows = r.rows[0], r.rows[1:]
	return true
}

// Err returns the error of a Scan that failed.
func (r *copiedRows) Err() error { return r.err }

// Close drops the rows.
func (r *copiedRows) Close() { r.rows, r.cur = nil, nil }

// Scan converts the columns of the current row into dest.
func (r *copiedRows) Scan(dest ...any) error {
	if r.cur == nil {
		return fmt.Errorf("sql: Scan called without calling Next")
	}
	if len(dest) != len(r.cur) {
		return fmt.Errorf("sql: expected %d destination arguments in Scan, not %d", len(r.cur), len(dest))
	}
	for i, d := range dest {
		if err := assign(d, r.cur[i]); err != nil {
			return fmt.Errorf("sql: Scan error on column index %d: %w", i, err)
		}
	}
	return nil
}

// assign stores src, a driver value of SQLite's (int64, float64, string,
// []byte, nil), in dst, a pointer: to a [sql.Scanner], to an interface,
// or to a string, integer, float, bool or byte slice type, or a pointer
// to one of those, which NULL sets to nil. It converts what database/sql
// would for these columns; a byte slice is src's (a copy already).
func assign(dst, src any) error {
	switch d := dst.(type) {
	case sql.Scanner:
		return d.Scan(src)
	case *any:
		*d = src
		return nil
	}
	p := reflect.ValueOf(dst)
	if p.Kind() != reflect.Pointer || p.IsNil() {
		return fmt.Errorf("destination not a pointer: %T", dst)
	}
	return assignValue(p.Elem(), src)
}

// assignValue stores src in v (see assign).
func assignValue(v reflect.Value, src any) error {
	if v.Kind() == reflect.Pointer {
		if src == nil {
			v.SetZero()
			return nil
		}
		e := reflect.New(v.Type().Elem())
		if err := assignValue(e.Elem(), src); err != nil {
			return err
		}
		v.Set(e)
		return nil
	}
	if src == nil {
		if v.Kind() == reflect.Slice || v.Kind() == reflect.Interface {
			v.SetZero()
			return nil
		}
		return fmt.Errorf("converting NULL to %s is unsupported", v.Type())
	}
	switch v.Kind() {
	case reflect.Interface:
		v.Set(reflect.ValueOf(src))
		return nil
	case reflect.String:
		switch s := src.(type) {
		case string:
			v.SetString(s)
			return nil
		case []byte:
			v.SetString(string(s))
			return nil
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			switch s := src.(type) {
			case []byte:
				v.SetBytes(s)
				return nil
			case string:
				v.SetBytes([]byte(s))
				return nil
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if s, ok := src.(int64); ok && !v.OverflowInt(s) {
			v.SetInt(s)
			return nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if s, ok := src.(int64); ok && s >= 0 && !v.OverflowUint(uint64(s)) {
			v.SetUint(uint64(s))
			return nil
		}
	case reflect.Float32, reflect.Float64:
		switch s := src.(type) {
		case float64:
			v.SetFloat(s)
			return nil
		case int64:
			v.SetFloat(float64(s))
			return nil
		}
	case reflect.Bool:
		if s, ok := src.(int64); ok {
			v.SetBool(s != 0)
			return nil
		}
	}
	return fmt.Errorf("converting %T to %s is unsupported", src, v.Type())
}
