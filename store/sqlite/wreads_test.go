package sqlite

import (
	"bytes"
	"database/sql"
	"testing"
)

// TestAssign checks the conversions of copied rows against what
// database/sql does for the same destinations.
func TestAssign(t *testing.T) {
	type name string
	var (
		i  int64
		pi = new(int64)
		s  string
		n  name
		b  = []byte("old")
		ni sql.NullInt64
		v  any
	)
	for _, tc := range []struct {
		dst, src any
		check    func() bool
	}{
		{&i, int64(7), func() bool { return i == 7 }},
		{&pi, nil, func() bool { return pi == nil }},
		{&pi, int64(3), func() bool { return pi != nil && *pi == 3 }},
		{&s, "x", func() bool { return s == "x" }},
		{&s, []byte("y"), func() bool { return s == "y" }},
		{&n, "z", func() bool { return n == "z" }},
		{&b, nil, func() bool { return b == nil }},
		{&b, []byte("data"), func() bool { return bytes.Equal(b, []byte("data")) }},
		{&ni, nil, func() bool { return !ni.Valid }},
		{&ni, int64(5), func() bool { return ni.Valid && ni.Int64 == 5 }},
		{&v, 1.5, func() bool { return v == 1.5 }},
	} {
		if err := assign(tc.dst, tc.src); err != nil || !tc.check() {
			t.Errorf("assign(%T, %#v) = %v, or a wrong value", tc.dst, tc.src, err)
		}
	}
	for _, tc := range []struct{ dst, src any }{
		{&i, nil}, {&s, nil}, {&i, "7"}, {i, int64(1)},
	} {
		if err := assign(tc.dst, tc.src); err == nil {
			t.Errorf("assign(%T, %#v) succeeded; want an error", tc.dst, tc.src)
		}
	}
}
