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

// A migration's first line may say which older schema can still use the
// database; a bad one is an error naming the file.
func TestLoadCompatible(t *testing.T) {
	ms, err := migrate.Load(fstest.MapFS{
		"migrations/0001_init.sql": {Data: []byte("one")},
		"migrations/0002_more.sql": {Data: []byte("-- compatible-with: 1\nALTER TABLE x ADD COLUMN y int;")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Compatible != 1 || ms[1].Compatible != 1 {
		t.Fatalf("Compatible = %d, %d; want 1, 1", ms[0].Compatible, ms[1].Compatible)
	}
	for _, bad := range []string{"-- compatible-with: 3\n", "-- compatible-with: x\n", "-- compatible-with: 0\n"} {
		_, err := migrate.Load(fstest.MapFS{
			"migrations/0001_init.sql": {Data: []byte("one")},
			"migrations/0002_more.sql": {Data: []byte(bad)},
		})
		if err == nil || !strings.Contains(err.Error(), "0002_more.sql") {
			t.Errorf("%q: %v; want an error naming the file", bad, err)
		}
	}
}
