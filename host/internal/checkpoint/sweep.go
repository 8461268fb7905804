package checkpoint

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// MaxMarks is the most referenced blobs one sweep holds in memory (about
// 64 bytes each: 128 MiB at most). A sweep that would mark more fails
// with [ErrTooManyMarks] and removes nothing: it never deletes on an
// incomplete mark.
const MaxMarks = 1 << 21

// ErrTooManyMarks reports a sweep over more referenced blobs than
// [MaxMarks].
var ErrTooManyMarks = errors.New("checkpoint: too many referenced blobs for one sweep")

// Sweep is one mark-and-sweep of the blob store: the caller marks every
// hash its logs still reference ([Sweep.Mark]), then [Sweep.Finish]
// removes the blobs nobody marked. What no log references yet is kept
// too: the content in the manifests of the store's trackers (a baseline's
// files, which a later checkpoint names as their Before), every blob put
// from [Store.BeginSweep] on (a checkpoint in flight), and every blob
// younger than the grace period (one another process sharing the
// directory is writing). A Sweep is used by one goroutine; the store's
// other methods go on meanwhile.
type Sweep struct {
	s      *Store
	start  time.Time
	grace  time.Duration
	marked map[[32]byte]struct{}
	err    error
}

// SweepResult is what a sweep removed and kept.
type SweepResult struct {
	// Removed and RemovedBytes count the blobs removed (or, dry, that
	// would be).
	Removed      int
	RemovedBytes int64
	// Kept counts the blobs left.
	Kept int
}

// BeginSweep starts a sweep: from now until [Sweep.Close] every blob the
// store puts is kept, and the content the trackers' manifests hold is
// marked. Blobs modified less than grace before now are kept whatever the
// marks; a negative grace is zero. Only one sweep runs at a time: a
// second BeginSweep fails until the first is closed.
func (s *Store) BeginSweep(grace time.Duration) (*Sweep, error) {
	s.mu.Lock()
	if s.fresh != nil {
		s.mu.Unlock()
		return nil, errors.New("checkpoint: a sweep is running")
	}
	s.fresh = make(map[string]struct{})
	trackers := make([]*Tracker, 0, len(s.trk))
	for _, t := range s.trk {
		trackers = append(trackers, t)
	}
	s.mu.Unlock()
	sw := &Sweep{s: s, start: time.Now(), grace: max(grace, 0), marked: make(map[[32]byte]struct{})}
	for _, t := range trackers {
		t.mu.Lock()
		for _, e := range t.files {
			if e.kept && e.st.Hash != "" {
				sw.Mark(e.st.Hash)
			}
		}
		t.mu.Unlock()
	}
	return sw, nil
}

// Mark keeps the blob of hash (sha256, hex); a malformed hash is
// ignored. Past [MaxMarks] it records [ErrTooManyMarks], which Finish
// returns.
func (sw *Sweep) Mark(hash string) {
	k, ok := key(hash)
	if !ok || sw.err != nil {
		return
	}
	if len(sw.marked) >= MaxMarks {
		if _, ok := sw.marked[k]; !ok {
			sw.err = fmt.Errorf("%w (%d)", ErrTooManyMarks, MaxMarks)
			return
		}
	}
	sw.marked[k] = struct{}{}
}

// Finish removes every blob that is not marked, not put since the sweep
// began and older than the grace period, reading the blob directory one
// fan-out directory at a time; with dry set it removes nothing and counts
// what it would remove. It stops early with ctx's error (what it removed
// stays removed; the rest is left for the next sweep).
func (sw *Sweep) Finish(ctx context.Context, dry bool) (SweepResult, error) {
	var res SweepResult
	if sw.err != nil {
		return res, sw.err
	}
	base := filepath.Join(sw.s.cfg.Dir, "blobs")
	fan, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	} else if err != nil {
		return res, fmt.Errorf("checkpoint: sweep: %w", err)
	}
	cutoff := sw.start.Add(-sw.grace)
	for _, d := range fan {
		if !d.IsDir() || len(d.Name()) != 2 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		blobs, err := os.ReadDir(filepath.Join(base, d.Name()))
		if err != nil {
			return res, fmt.Errorf("checkpoint: sweep: %w", err)
		}
		for _, b := range blobs {
			name := b.Name()
			k, ok := key(name)
			if !ok || !strings.HasPrefix(name, d.Name()) {
				continue // not a blob
			}
			if _, ok := sw.marked[k]; ok {
				res.Kept++
				continue
			}
			info, err := b.Info()
			if err != nil || !info.ModTime().Before(cutoff) {
				res.Kept++
				continue
			}
			removed, err := sw.s.removeUnlessFresh(filepath.Join(base, d.Name(), name), name, dry)
			if err != nil {
				return res, fmt.Errorf("checkpoint: sweep: %w", err)
			}
			if !removed {
				res.Kept++
				continue
			}
			res.Removed++
			res.RemovedBytes += info.Size()
		}
	}
	return res, nil
}

// Close ends the sweep; the store stops keeping track of the blobs it
// puts. It is safe to call more than once.
func (sw *Sweep) Close() {
	sw.s.mu.Lock()
	sw.s.fresh = nil
	sw.s.mu.Unlock()
	sw.marked = nil
}

// removeUnlessFresh removes the blob of hash at p unless it was put since
// the sweep began (put notes the hash before it looks for the blob, under
// the same lock, so a blob put concurrently is either noted here or put
// again after the removal). It reports whether it removed (dry: would
// remove) it.
func (s *Store) removeUnlessFresh(p, hash string, dry bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.fresh[hash]; ok {
		return false, nil
	}
	if dry {
		return true, nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// noteFresh records, during a sweep, that the blob of hash is being put.
func (s *Store) noteFresh(hash string) {
	s.mu.Lock()
	if s.fresh != nil {
		s.fresh[hash] = struct{}{}
	}
	s.mu.Unlock()
}

// key decodes a blob's name.
func key(hash string) (k [32]byte, ok bool) {
	if len(hash) != 64 {
		return k, false
	}
	_, err := hex.Decode(k[:], []byte(hash))
	return k, err == nil
}
