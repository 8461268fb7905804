package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"weft.dev/weft/store"
)

// Retention is the file's retention policy (docs/config.md): which ended
// sessions a serving host purges, and how its passes run. Durations are
// Go durations ("90m", "720h") or whole days ("30d"); a rule left out is
// off.
type Retention struct {
	// MaxAge purges a session whose last event is older.
	MaxAge string `json:"maxAge,omitempty"`
	// MaxSessions keeps the newest sessions that are not deleted and
	// purges the older ones.
	MaxSessions int `json:"maxSessions,omitempty"`
	// DeletedAfter purges a deleted session once it has been deleted this
	// long.
	DeletedAfter string `json:"deletedAfter,omitempty"`
	// Interval is the time between background passes (default 10m);
	// "off" runs none (weft gc still runs one).
	Interval string `json:"interval,omitempty"`
	// PassTime bounds the purges of one background pass (default 10s).
	PassTime string `json:"passTime,omitempty"`
	// Batch is the most sessions one background pass purges (default 100).
	Batch int `json:"batch,omitempty"`
	// SweepInterval is the least time between two background sweeps of
	// the checkpoint blobs (default 1h).
	SweepInterval string `json:"sweepInterval,omitempty"`
	// BlobGrace keeps checkpoint blobs younger than it (default 1h).
	BlobGrace string `json:"blobGrace,omitempty"`
}

// retentionKeys lists the keys of retention, in the order of
// docs/config.md.
var retentionKeys = []string{"maxAge", "maxSessions", "deletedAfter", "interval", "passTime", "batch", "sweepInterval", "blobGrace"}

// RetentionSettings is a [Retention] parsed: the policy and the passes'
// settings, zero for a default and Interval negative for "off".
type RetentionSettings struct {
	Policy                                       store.Retention
	Interval, PassTime, SweepInterval, BlobGrace time.Duration
	Batch                                        int
}

// Settings parses r. An error names the key.
func (r Retention) Settings() (RetentionSettings, error) {
	var s RetentionSettings
	if r.MaxSessions < 0 || r.Batch < 0 {
		return s, fmt.Errorf("retention: maxSessions and batch want a positive number (or leave them out)")
	}
	s.Policy.MaxSessions, s.Batch = r.MaxSessions, r.Batch
	for _, d := range []struct {
		key, v string
		to     *time.Duration
	}{
		{"maxAge", r.MaxAge, &s.Policy.MaxAge}, {"deletedAfter", r.DeletedAfter, &s.Policy.DeletedAfter},
		{"interval", r.Interval, &s.Interval}, {"passTime", r.PassTime, &s.PassTime},
		{"sweepInterval", r.SweepInterval, &s.SweepInterval}, {"blobGrace", r.BlobGrace, &s.BlobGrace},
	} {
		if d.v == "" {
			continue
		}
		if d.key == "interval" && d.v == "off" {
			*d.to = -1
			continue
		}
		v, err := parseDuration(d.v)
		if err != nil || v <= 0 {
			return s, fmt.Errorf("retention: %s %q: want a positive duration such as \"90m\", \"720h\" or \"30d\"", d.key, d.v)
		}
		*d.to = v
	}
	return s, nil
}

// parseDuration is time.ParseDuration, and whole days ("30d").
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		if err != nil {
			return 0, err
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}
