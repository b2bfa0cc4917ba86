// This file stores the agent directory of urn:xmpp:agent-api:0 in
// PostgreSQL: it implements dirdb.Driver, checked by store/storetest
// like store/sqlite. Every committed change bumps change_generation
// so that other instances and operator commands notice it.
//
// Each method is one transaction with guarded statements; the invariants
// (one active version per endpoint, immutable versions, permanent
// tombstones) are also enforced by the schema in
// migrations/0001_directory.sql. Writers serialize on a transaction-level
// advisory lock: directory changes are rare, and under read committed two
// instances activating versions of one endpoint at once would otherwise
// race into the one-active index instead of one simply following the
// other.

package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/directory/dirdb"
)

// writeLock is the advisory lock key of directory writes ("agentdir").
const writeLock int64 = 0x6167656e74646972

// Directory is the PostgreSQL directory store.
type Directory struct{ db *DB }

var _ dirdb.Driver = (*Directory)(nil)

// NewDirectory returns a Store on a database opened with Open.
func NewDirectory(db *DB) *Directory { return &Directory{db: db} }

func (s *Directory) Register(ctx context.Context, endpoint, version, hash string, canonical []byte) (inserted bool, err error) {
	err = s.tx(ctx, func(tx pgx.Tx) error {
		var have string
		switch err := tx.QueryRow(ctx,
			`SELECT hash FROM directory_versions WHERE endpoint = $1 AND version = $2`,
			endpoint, version).Scan(&have); {
		case err == nil:
			if have != hash {
				return dirdb.ErrConflict
			}
			return nil
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		switch err := tx.QueryRow(ctx,
			`SELECT hash FROM directory_tombstones WHERE endpoint = $1 AND version = $2`,
			endpoint, version).Scan(&have); {
		case err == nil:
			if have != hash {
				return dirdb.ErrConflict
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		if _, err := tx.Exec(ctx,
			`INSERT INTO directory_versions (endpoint, version, hash, canonical) VALUES ($1, $2, $3, $4)`,
			endpoint, version, hash, canonical); err != nil {
			return err
		}
		inserted = true
		return BumpGeneration(ctx, tx)
	})
	return inserted, err
}

func (s *Directory) Activate(ctx context.Context, endpoint, version, hash string) (changed bool, err error) {
	err = s.tx(ctx, func(tx pgx.Tx) error {
		var have string
		var active bool
		err := tx.QueryRow(ctx,
			`SELECT hash, active FROM directory_versions WHERE endpoint = $1 AND version = $2`,
			endpoint, version).Scan(&have, &active)
		if errors.Is(err, pgx.ErrNoRows) {
			return dirdb.ErrNotFound
		}
		if err != nil {
			return err
		}
		if have != hash {
			return dirdb.ErrHashMismatch
		}
		if active {
			return nil
		}
		// Two statements: the partial unique index is checked per row.
		if _, err := tx.Exec(ctx,
			`UPDATE directory_versions SET active = false WHERE endpoint = $1 AND active`, endpoint); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx,
			`UPDATE directory_versions SET active = true WHERE endpoint = $1 AND version = $2 AND hash = $3`,
			endpoint, version, hash); err != nil {
			return err
		}
		changed = true
		return BumpGeneration(ctx, tx)
	})
	return changed, err
}

func (s *Directory) Deactivate(ctx context.Context, endpoint string) (changed bool, err error) {
	err = s.tx(ctx, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM directory_versions WHERE endpoint = $1`, endpoint).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return dirdb.ErrNotFound
		}
		tag, err := tx.Exec(ctx,
			`UPDATE directory_versions SET active = false WHERE endpoint = $1 AND active`, endpoint)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		changed = true
		return BumpGeneration(ctx, tx)
	})
	return changed, err
}

func (s *Directory) Versions(ctx context.Context, endpoint string) ([]dirdb.Version, error) {
	rows, err := s.db.Pool.Query(ctx,
		`SELECT version, hash, active FROM directory_versions WHERE endpoint = $1 ORDER BY seq`, endpoint)
	out, err := collect(rows, err, func(row pgx.Row) (dirdb.Version, error) {
		v := dirdb.Version{Endpoint: endpoint}
		if err := row.Scan(&v.Version, &v.Hash, &v.Active); err != nil {
			return v, err
		}
		return v, nil
	})
	if err != nil {
		return nil, fmt.Errorf("dirpg: versions: %w", err)
	}
	return out, nil
}

func (s *Directory) RemoveVersion(ctx context.Context, endpoint, version string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		var hash string
		var active bool
		err := tx.QueryRow(ctx,
			`SELECT hash, active FROM directory_versions WHERE endpoint = $1 AND version = $2`,
			endpoint, version).Scan(&hash, &active)
		if errors.Is(err, pgx.ErrNoRows) {
			return dirdb.ErrNotFound
		}
		if err != nil {
			return err
		}
		if active {
			return dirdb.ErrActive
		}
		if err := tombstone(ctx, tx, endpoint, version, hash); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx,
			`DELETE FROM directory_versions WHERE endpoint = $1 AND version = $2 AND NOT active`,
			endpoint, version); err != nil {
			return err
		}
		return BumpGeneration(ctx, tx)
	})
}

func (s *Directory) RemoveEndpoint(ctx context.Context, endpoint string, expect []string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT version, hash FROM directory_versions WHERE endpoint = $1`, endpoint)
		if err != nil {
			return err
		}
		have, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dirdb.Version, error) {
			var v dirdb.Version
			return v, r.Scan(&v.Version, &v.Hash)
		})
		if err != nil {
			return err
		}
		if len(have) == 0 {
			return dirdb.ErrNotFound
		}
		got := make([]string, len(have))
		for i, v := range have {
			got[i] = v.Version
		}
		want := slices.Clone(expect)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			return dirdb.ErrChanged
		}
		for _, v := range have {
			if err := tombstone(ctx, tx, endpoint, v.Version, v.Hash); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM directory_versions WHERE endpoint = $1`, endpoint); err != nil {
			return err
		}
		return BumpGeneration(ctx, tx)
	})
}

func (s *Directory) Generation(ctx context.Context) (int64, error) {
	g, err := s.db.Generation(ctx)
	if err != nil {
		return 0, fmt.Errorf("dirpg: %w", err)
	}
	return g, nil
}

// Load reads the generation and every version from one repeatable-read
// snapshot; see dirdb.Driver.
func (s *Directory) Load(ctx context.Context, need func(endpoint, version, hash string) bool, content func(v dirdb.Version) error) (gen int64, out []dirdb.Version, err error) {
	tx, err := s.db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, nil, fmt.Errorf("dirpg: load: %w", err)
	}
	defer tx.Rollback(ctx)
	if err := tx.QueryRow(ctx, `SELECT generation FROM change_generation WHERE id = 1`).Scan(&gen); err != nil {
		return 0, nil, fmt.Errorf("dirpg: load: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT endpoint, version, hash, active FROM directory_versions ORDER BY seq`)
	if err != nil {
		return 0, nil, fmt.Errorf("dirpg: load: %w", err)
	}
	var needed []int
	err = each(rows, nil, func(row pgx.Row) error {
		var v dirdb.Version
		if err := row.Scan(&v.Endpoint, &v.Version, &v.Hash, &v.Active); err != nil {
			return err
		}
		if need(v.Endpoint, v.Version, v.Hash) {
			needed = append(needed, len(out))
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("dirpg: load: %w", err)
	}
	// One query for the needed contents, streamed one row at a time so a
	// large directory is never held twice.
	if len(needed) == 0 {
		return gen, out, nil
	}
	at := make(map[[2]string]int, len(needed))
	eps, vers := make([]string, 0, len(needed)), make([]string, 0, len(needed))
	for _, i := range needed {
		at[[2]string{out[i].Endpoint, out[i].Version}] = i
		eps, vers = append(eps, out[i].Endpoint), append(vers, out[i].Version)
	}
	crows, err := tx.Query(ctx, `SELECT d.endpoint, d.version, d.canonical FROM directory_versions d
		JOIN unnest($1::text[], $2::text[]) AS n (endpoint, version)
		  ON d.endpoint = n.endpoint COLLATE "C" AND d.version = n.version COLLATE "C"`, eps, vers)
	if err != nil {
		return 0, nil, fmt.Errorf("dirpg: load: %w", err)
	}
	var cerr error // content's own error, passed on as it is
	err = each(crows, nil, func(r pgx.Row) error {
		var e, v string
		var c []byte
		if err := r.Scan(&e, &v, &c); err != nil {
			return err
		}
		if i, ok := at[[2]string{e, v}]; ok {
			row := out[i]
			row.Canonical = c
			if cerr = content(row); cerr != nil {
				return cerr
			}
		}
		return nil
	})
	if cerr != nil {
		return 0, nil, cerr
	}
	if err != nil {
		return 0, nil, fmt.Errorf("dirpg: load: %w", err)
	}
	return gen, out, nil
}

// tx runs f in one write transaction under the directory's write lock.
func (s *Directory) tx(ctx context.Context, f func(pgx.Tx) error) error {
	tx, err := s.db.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("dirpg: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, writeLock); err != nil {
		return fmt.Errorf("dirpg: lock: %w", err)
	}
	if err := f(tx); err != nil {
		if isSentinel(err) {
			return err
		}
		return fmt.Errorf("dirpg: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("dirpg: commit: %w", err)
	}
	return nil
}

func isSentinel(err error) bool {
	return errors.Is(err, dirdb.ErrNotFound) || errors.Is(err, dirdb.ErrConflict) || errors.Is(err, dirdb.ErrHashMismatch) ||
		errors.Is(err, dirdb.ErrActive) || errors.Is(err, dirdb.ErrChanged)
}

// tombstone records a removal; a tombstone for the same hash may already
// exist from an earlier removal of identical content.
func tombstone(ctx context.Context, tx pgx.Tx, endpoint, version, hash string) error {
	_, err := tx.Exec(ctx,
		`INSERT INTO directory_tombstones (endpoint, version, hash) VALUES ($1, $2, $3)
		 ON CONFLICT (endpoint, version) DO NOTHING`, endpoint, version, hash)
	return err
}

var _ dirdb.Fetcher = (*Directory)(nil)

// Canonical reads one version's canonical bytes.
func (s *Directory) Canonical(ctx context.Context, endpoint, version string) ([]byte, error) {
	var c []byte
	err := s.db.Pool.QueryRow(ctx, `SELECT canonical FROM directory_versions WHERE endpoint = $1 AND version = $2`, endpoint, version).Scan(&c)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, dirdb.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("dirpg: canonical: %w", err)
	}
	return c, nil
}
