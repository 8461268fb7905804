package session

import (
	"context"

	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/store/record"
)

// Update changes the session's title and model (fields of d that are nil
// stay as they are; the host has validated the others) and returns the
// session's record. session.updated, holding only the fields that
// change, is committed with rc's receipt; when nothing changes nothing is
// appended, and the caller stores the receipt. A run that has started
// keeps its model; runs that start later and name none use the new one.
func (s *Session) Update(ctx context.Context, d event.SessionUpdatedData, rc *idem.Claim) (record.Session, error) {
	var rec record.Session
	err := s.command(func() error {
		cur := s.j.Session()
		if d.Title != nil && *d.Title == cur.Title {
			d.Title = nil
		}
		if d.Model != nil && *d.Model == cur.Model {
			d.Model = nil
		}
		if d.Budget != nil {
			if err := s.checkBudgetUpdate(*d.Budget); err != nil {
				return err
			}
			if cur.Budget != nil && *cur.Budget == *d.Budget || cur.Budget == nil && d.Budget.IsZero() {
				d.Budget = nil
			}
		}
		if d.Title != nil || d.Model != nil || d.Budget != nil {
			e, err := event.New("", event.SessionUpdated, d)
			if err != nil {
				return err
			}
			if _, err := s.append(ctx, rc, idem.Ref{ID: s.id}, e); err != nil {
				return err
			}
		}
		rec = s.j.Session()
		return nil
	})
	return rec, err
}
