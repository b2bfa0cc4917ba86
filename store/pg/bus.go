// This file implements cluster.Bus over PostgreSQL LISTEN/NOTIFY and
// cluster.Leases over a lease table, for gateway instances sharing one
// PostgreSQL database. Lease times are the database's clock.

package pg

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentgw/agentgw/cluster"
	"github.com/agentgw/agentgw/internal/backoff"
)

// pgChannel is the one PostgreSQL channel every bus channel travels on.
const pgChannel = "agentgw_bus"

// inline is the largest payload sent in the NOTIFY itself (base64 and the
// envelope must stay under PostgreSQL's 8000 bytes).
const inlinePayload = 5000

const clusterSchema = `
CREATE TABLE IF NOT EXISTS agentgw_leases (
	name    TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 512),
	holder  TEXT NOT NULL CHECK (length(holder) BETWEEN 1 AND 255),
	expires TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS agentgw_bus_payloads (
	id      BIGSERIAL PRIMARY KEY,
	created TIMESTAMPTZ NOT NULL DEFAULT now(),
	payload BYTEA NOT NULL
);`

// migrateLock is the advisory lock key under which the schema is created,
// so instances starting together do not race on CREATE TABLE.
const clusterMigrateLock = 0x6167_7763_6c75 // "agwclu"

// Cluster is a cluster.Bus and cluster.Leases on one PostgreSQL database.
type Cluster struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	mu     sync.Mutex
	subs   map[string]map[*func([]byte)]bool
	cancel context.CancelFunc
	done   chan struct{}
	ready  chan struct{}
}

var (
	_ cluster.Bus    = (*Cluster)(nil)
	_ cluster.Leases = (*Cluster)(nil)
)

// OpenCluster creates the tables when missing (under an advisory lock) and starts
// the listener on a dedicated connection, reconnecting with backoff. It
// returns once the listener is listening, so nothing published after Open
// returns is missed.
func OpenCluster(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (*Cluster, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := migrateCluster(ctx, pool); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	s := &Cluster{pool: pool, log: log, subs: map[string]map[*func([]byte)]bool{},
		cancel: cancel, done: make(chan struct{}), ready: make(chan struct{})}
	go s.listen(lctx)
	select {
	case <-s.ready:
		return s, nil
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
}

func migrateCluster(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("clusterpg: migrate: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(clusterMigrateLock)); err != nil {
		return fmt.Errorf("clusterpg: migrate lock: %w", err)
	}
	if _, err := tx.Exec(ctx, clusterSchema); err != nil {
		return fmt.Errorf("clusterpg: migrate: %w", err)
	}
	return tx.Commit(ctx)
}

// Close stops the listener. The pool stays open.
func (s *Cluster) Close() {
	s.cancel()
	<-s.done
}

type busEnvelope struct {
	C   string `json:"c"`
	P   string `json:"p,omitempty"`   // base64 payload
	Ref int64  `json:"ref,omitempty"` // agentgw_bus_payloads id of a large one
}

// Publish sends payload to every subscriber of channel on every instance.
// It is sent when the statement commits (at once outside a transaction).
func (s *Cluster) Publish(ctx context.Context, channel string, payload []byte) error {
	if len(payload) > cluster.MaxPayload {
		return errors.New("clusterpg: notification payload too large")
	}
	env := busEnvelope{C: channel}
	if len(payload) <= inlinePayload {
		env.P = base64.StdEncoding.EncodeToString(payload)
	} else {
		// Too large for NOTIFY: store it and send the reference, in one
		// transaction so the reference never names a missing row.
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return fmt.Errorf("clusterpg: publish: %w", err)
		}
		defer tx.Rollback(ctx)
		if err := tx.QueryRow(ctx, `INSERT INTO agentgw_bus_payloads(payload) VALUES ($1) RETURNING id`, payload).Scan(&env.Ref); err != nil {
			return fmt.Errorf("clusterpg: publish: %w", err)
		}
		// Old payloads were delivered long ago.
		if _, err := tx.Exec(ctx, `DELETE FROM agentgw_bus_payloads WHERE created < now() - interval '10 minutes'`); err != nil {
			return fmt.Errorf("clusterpg: publish: %w", err)
		}
		b, _ := json.Marshal(env)
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, pgChannel, string(b)); err != nil {
			return fmt.Errorf("clusterpg: publish: %w", err)
		}
		return tx.Commit(ctx)
	}
	b, _ := json.Marshal(env)
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, pgChannel, string(b)); err != nil {
		return fmt.Errorf("clusterpg: publish: %w", err)
	}
	return nil
}

// Subscribe registers fn for channel.
func (s *Cluster) Subscribe(channel string, fn func([]byte)) func() {
	p := &fn
	s.mu.Lock()
	if s.subs[channel] == nil {
		s.subs[channel] = map[*func([]byte)]bool{}
	}
	s.subs[channel][p] = true
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.subs[channel], p)
		s.mu.Unlock()
	}
}

func (s *Cluster) listen(ctx context.Context) {
	defer close(s.done)
	bo := backoff.New(100*time.Millisecond, 5*time.Second)
	first := true
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, &first)
		if ctx.Err() != nil {
			return
		}
		d := bo.Next()
		s.log.Warn("clusterpg: notification listener lost; reconnecting", "in", d, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

func (s *Cluster) listenOnce(ctx context.Context, first *bool) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgChannel); err != nil {
		return err
	}
	if *first {
		*first = false
		close(s.ready)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		s.deliver(ctx, n.Payload)
	}
}

func (s *Cluster) deliver(ctx context.Context, raw string) {
	var env busEnvelope
	if err := json.Unmarshal([]byte(raw), &env); err != nil || env.C == "" {
		return // not ours
	}
	s.mu.Lock()
	var fns []func([]byte)
	for f := range s.subs[env.C] {
		fns = append(fns, *f)
	}
	s.mu.Unlock()
	if len(fns) == 0 {
		return
	}
	var payload []byte
	if env.Ref != 0 {
		if err := s.pool.QueryRow(ctx, `SELECT payload FROM agentgw_bus_payloads WHERE id = $1`, env.Ref).Scan(&payload); err != nil {
			s.log.Warn("clusterpg: large notification payload unreadable", "err", err)
			return
		}
	} else {
		var err error
		if payload, err = base64.StdEncoding.DecodeString(env.P); err != nil {
			return
		}
	}
	for _, f := range fns {
		f(append([]byte(nil), payload...))
	}
}

// Acquire takes or renews name for holder for ttl, on the database's clock.
func (s *Cluster) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (bool, string, error) {
	var cur string
	err := s.pool.QueryRow(ctx, `
		INSERT INTO agentgw_leases(name, holder, expires) VALUES ($1, $2, now() + $3::interval)
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires = EXCLUDED.expires
			WHERE agentgw_leases.holder = EXCLUDED.holder OR agentgw_leases.expires <= now()
		RETURNING holder`, name, holder, ttl.String()).Scan(&cur)
	if errors.Is(err, pgx.ErrNoRows) {
		// Held by another, live: read who.
		err = s.pool.QueryRow(ctx, `SELECT holder FROM agentgw_leases WHERE name = $1`, name).Scan(&cur)
		if err != nil {
			return false, "", fmt.Errorf("clusterpg: lease: %w", err)
		}
		return false, cur, nil
	}
	if err != nil {
		return false, "", fmt.Errorf("clusterpg: lease: %w", err)
	}
	return cur == holder, cur, nil
}

// Release expires name now if holder holds it.
func (s *Cluster) Release(ctx context.Context, name, holder string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM agentgw_leases WHERE name = $1 AND holder = $2`, name, holder)
	if err != nil {
		return fmt.Errorf("clusterpg: release: %w", err)
	}
	return nil
}

// List returns every lease.
func (s *Cluster) List(ctx context.Context) ([]cluster.Lease, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, holder, expires, expires > now() FROM agentgw_leases ORDER BY name`)
	out, err := collect(rows, err, func(row pgx.Row) (cluster.Lease, error) {
		var l cluster.Lease
		if err := row.Scan(&l.Name, &l.Holder, &l.Expires, &l.Live); err != nil {
			return l, err
		}
		return l, nil
	})
	if err != nil {
		return nil, fmt.Errorf("clusterpg: leases: %w", err)
	}
	return out, nil
}
