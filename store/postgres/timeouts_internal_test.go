package postgres

import (
	"testing"
	"time"
)

// TestTimeoutsFromTTL: each connection's timeouts derive from the lease
// TTL (half of it to wait idle in a transaction or for a lock, all of it
// for a statement), and a timeout the URL sets is kept.
func TestTimeoutsFromTTL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		ttl  time.Duration
		want map[string]string
	}{
		{"postgres://u@h/db", 0, map[string]string{
			"idle_in_transaction_session_timeout": "5000", "lock_timeout": "5000", "statement_timeout": "10000"}},
		{"postgres://u@h/db", 3 * time.Second, map[string]string{
			"idle_in_transaction_session_timeout": "1500", "lock_timeout": "1500", "statement_timeout": "3000"}},
		{"postgres://u@h/db?statement_timeout=60000", 2 * time.Second, map[string]string{
			"idle_in_transaction_session_timeout": "1000", "lock_timeout": "1000", "statement_timeout": "60000"}},
		{"postgres://u@h/db?options=-c%20lock_timeout%3D0", 2 * time.Second, map[string]string{
			"idle_in_transaction_session_timeout": "1000", "lock_timeout": "", "statement_timeout": "2000"}},
	} {
		pcfg, _, err := parseConfig(Config{URL: tc.url, LeaseTTL: tc.ttl})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.want {
			if got := pcfg.ConnConfig.RuntimeParams[k]; got != v {
				t.Errorf("%s TTL %v: %s = %q; want %q", tc.url, tc.ttl, k, got, v)
			}
		}
	}
	if _, _, err := parseConfig(Config{URL: "postgres://u@h/db", LeaseTTL: time.Millisecond}); err == nil {
		t.Error("a 1ms TTL was accepted")
	}
}
