package migrate_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"go.uber.org/goleak"

	"weft.dev/weft/store/internal/migrate"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestLoad(t *testing.T) {
	ms, err := migrate.Load(fstest.MapFS{
		"migrations/0002_more.sql": {Data: []byte("two")},
		"migrations/0001_init.sql": {Data: []byte("one")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 1 || ms[0].Name != "0001_init.sql" || ms[0].SQL != "one" || ms[1].Version != 2 {
		t.Fatalf("Load = %+v", ms)
	}
}

func TestLoadErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		fs   fstest.MapFS
		want string
	}{
		"gap":       {fstest.MapFS{"migrations/0001_a.sql": {}, "migrations/0003_c.sql": {}}, "0003_c.sql: want version 2"},
		"repeat":    {fstest.MapFS{"migrations/0001_a.sql": {}, "migrations/0001_b.sql": {}}, "0001_b.sql: want version 2"},
		"bad name":  {fstest.MapFS{"migrations/init.sql": {}}, "init.sql: want NNNN_name.sql"},
		"not a num": {fstest.MapFS{"migrations/x1_a.sql": {}}, "x1_a.sql"},
		"no dir":    {fstest.MapFS{}, "read migrations"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := migrate.Load(tc.fs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}
