package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// listing is a SessionLog that lists fixed records, newest first, in
// pages, and counts the pages it serves.
type listing struct {
	store.SessionLog
	list  []record.Session
	pages int
}

func (l *listing) Sessions(_ context.Context, p store.ListSessionsParams) ([]record.Session, error) {
	l.pages++
	i := 0
	if p.Before != "" {
		i = slices.IndexFunc(l.list, func(s record.Session) bool { return s.ID == p.Before }) + 1
		if i == 0 {
			return nil, store.ErrNotFound
		}
	}
	return slices.Clone(l.list[i:min(i+p.Limit, len(l.list))]), nil
}

func TestCandidates(t *testing.T) {
	now := time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	s := func(id string, idle time.Duration) record.Session {
		return record.Session{ID: id, UpdatedAt: now.Add(-idle)}
	}
	l := &listing{list: []record.Session{ // newest first
		s("new", time.Hour),
		{ID: "del-new", UpdatedAt: now.Add(-time.Hour), Deleted: true},
		s("mid", 2*day),
		{ID: "busy", UpdatedAt: now.Add(-40 * day), ActiveRunID: "r"},
		{ID: "del-old", UpdatedAt: now.Add(-2 * day), Deleted: true},
		s("third", 3*day),
		s("old", 40*day),
		s("fourth", 4*day),
	}}
	run := func(p store.CandidatesParams) (got []string) {
		t.Helper()
		p.Now, p.PageSize = now, 3
		for c, err := range store.Candidates(context.Background(), l, p) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, c.Session.ID+":"+c.Reason)
		}
		return got
	}
	for _, tc := range []struct {
		name string
		r    store.Retention
		want []string
	}{
		{"zero purges nothing", store.Retention{}, nil},
		{"age", store.Retention{MaxAge: 30 * day}, []string{"old:age"}},
		{"deleted", store.Retention{DeletedAfter: day}, []string{"del-old:deleted"}},
		// new, mid, busy are kept (busy has a run: it counts, and stays).
		{"count", store.Retention{MaxSessions: 3}, []string{"third:count", "old:count", "fourth:count"}},
		{"all", store.Retention{MaxAge: 30 * day, MaxSessions: 4, DeletedAfter: day},
			[]string{"del-old:deleted", "old:age", "fourth:count"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, run(store.CandidatesParams{Retention: tc.r})); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
		})
	}

	// A caller that purges each candidate as it gets it (here the
	// session that ends a page, "busy"... "third") sees the whole list.
	var purged []string
	for c, err := range store.Candidates(context.Background(), l, store.CandidatesParams{Retention: store.Retention{MaxAge: time.Minute}, Now: now, PageSize: 3}) {
		if err != nil {
			t.Fatalf("listing while purging: %v", err)
		}
		purged = append(purged, c.Session.ID)
		l.list = slices.DeleteFunc(l.list, func(s record.Session) bool { return s.ID == c.Session.ID })
	}
	if diff := cmp.Diff([]string{"new", "del-new", "mid", "del-old", "third", "old", "fourth"}, purged); diff != "" {
		t.Errorf("purged while listing (-want +got):\n%s", diff)
	}
}
