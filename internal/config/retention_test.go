package config

import (
	"strings"
	"testing"
	"time"

	"weft.dev/weft/store"
)

// TestRetention: the file's retention parses into the host's settings,
// days included, and a bad duration names its key.
func TestRetention(t *testing.T) {
	f, err := Parse([]byte(`{"retention": {"maxAge": "30d", "maxSessions": 500, "deletedAfter": "24h", "interval": "off", "blobGrace": "90m"}}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Retention.Settings()
	if err != nil {
		t.Fatal(err)
	}
	want := RetentionSettings{Policy: store.Retention{MaxAge: 30 * 24 * time.Hour, MaxSessions: 500, DeletedAfter: 24 * time.Hour}, Interval: -1, BlobGrace: 90 * time.Minute}
	if s != want {
		t.Fatalf("settings %+v, want %+v", s, want)
	}
	for _, bad := range []string{`{"maxAge": "soon"}`, `{"deletedAfter": "-1h"}`, `{"maxSessions": -1}`, `{"passTime": "off"}`} {
		_, err := Parse([]byte(`{"retention": ` + bad + `}`))
		if err == nil || !strings.Contains(err.Error(), "retention") {
			t.Errorf("retention %s: %v", bad, err)
		}
	}
	if _, err := Parse([]byte(`{"retention": {"keep": "1h"}}`)); err == nil {
		t.Error("an unknown key of retention was accepted")
	}
}
