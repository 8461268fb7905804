package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"weft.dev/weft/store"
)

// Node is a serving host as the nodes table records it.
type Node struct {
	// Holder is the host's lease holder name (LeaseConfig.Holder).
	Holder string
	// Addr is where the host takes the JSON-RPC requests that other
	// hosts forward to the sessions it owns (HOST:PORT).
	Addr string
	// Version is the host's weft version.
	Version string
}

// RegisterNode records n, or updates its row: a host registers when it
// starts serving, so that the other hosts can forward it the commands for
// its sessions.
func (s *Store) RegisterNode(ctx context.Context, n Node) error {
	if err := s.guard.Enter(); err != nil {
		return err
	}
	defer s.guard.Leave()
	_, err := s.pool.Exec(ctx, `INSERT INTO nodes (holder, addr, version, started_at, seen_at) VALUES ($1, $2, $3, now(), now())
		ON CONFLICT (holder) DO UPDATE SET addr = excluded.addr, version = excluded.version, seen_at = now(), draining = false`,
		n.Holder, n.Addr, n.Version)
	if err != nil {
		return s.errorf("register node "+n.Holder, err)
	}
	return nil
}

// RemoveNode deletes holder's row: a host that stops serving.
func (s *Store) RemoveNode(ctx context.Context, holder string) error {
	if err := s.guard.Enter(); err != nil {
		return err
	}
	defer s.guard.Leave()
	if _, err := s.pool.Exec(ctx, `DELETE FROM nodes WHERE holder = $1`, holder); err != nil {
		return s.errorf("remove node "+holder, err)
	}
	return nil
}

// NodeAddr returns the address holder registered, or an error wrapping
// [store.ErrNotFound] when it registered none (it is not a serving host,
// or it stopped).
func (s *Store) NodeAddr(ctx context.Context, holder string) (string, error) {
	if err := s.guard.Enter(); err != nil {
		return "", err
	}
	defer s.guard.Leave()
	var addr string
	err := s.pool.QueryRow(ctx, `SELECT addr FROM nodes WHERE holder = $1`, holder).Scan(&addr)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && addr == "" {
		return "", fmt.Errorf("%w: node %s has no address", store.ErrNotFound, holder)
	}
	if err != nil {
		return "", s.errorf("read node "+holder, err)
	}
	return addr, nil
}
