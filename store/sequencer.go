package store

import (
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// A Sequencer makes the batches of a session's log as its one writer
// does: gap-free seqs from 1, times a microsecond apart, and the records
// the projection derives, in the same batch. The journal does this for a
// live session; a Sequencer writes a history directly, for benchmarks and
// tests that need a long one without running it. It is not safe for
// concurrent use.
type Sequencer struct {
	id   string
	proj *record.Projection
	now  time.Time
}

// NewSequencer returns a Sequencer of a new session id whose events are
// stamped from start on.
func NewSequencer(id string, start time.Time) *Sequencer {
	return &Sequencer{id: id, proj: record.NewProjection(record.Session{}, nil), now: start}
}

// Batch sequences evs after the events before them and returns the batch
// that appends them with their records.
func (s *Sequencer) Batch(evs []event.Event) (Batch, error) {
	for i := range evs {
		s.now = s.now.Add(time.Microsecond)
		evs[i].SessionID, evs[i].Seq, evs[i].Time = s.id, s.LastSeq()+1, s.now.UTC()
		if err := s.proj.Apply(evs[i]); err != nil {
			return Batch{}, err
		}
	}
	b := Batch{SessionID: s.id, Events: evs}
	b.SetRecords(s.proj.Flush())
	return b, nil
}

// LastSeq returns the seq of the last event sequenced.
func (s *Sequencer) LastSeq() int64 { return s.proj.Session.LastSeq }
