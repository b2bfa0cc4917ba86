// This file stores the agent directory of urn:xmpp:agent-api:0 in
// SQLite: it implements dirdb.Driver. Every committed change bumps
// change_generation so that other processes notice it.
//
// Each method is one transaction with guarded statements; the invariants
// (one active version per endpoint, immutable versions, permanent
// tombstones) are also enforced by the schema in
// migrations/0001_directory.sql.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/agentgw/agentgw/directory/dirdb"
)

// Directory is the SQLite directory store.
type Directory struct {
	w *sql.DB // the single writer connection
	r *sql.DB // read-only pool
}

var _ dirdb.Driver = (*Directory)(nil)

// NewDirectory returns a Store on a database opened with Migrations.
func NewDirectory(db *DB) *Directory { return &Directory{w: db.Write, r: db.Read} }

// Register inserts a version. It reports inserted=false, err=nil when the
// identical version is already registered, and dirdb.ErrConflict when the version
// exists or is tombstoned with a different hash.
func (s *Directory) Register(ctx context.Context, endpoint, version, hash string, canonical []byte) (inserted bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		var have string
		switch err := tx.QueryRowContext(ctx,
			`SELECT hash FROM directory_versions WHERE endpoint = ? AND version = ?`,
			endpoint, version).Scan(&have); {
		case err == nil:
			if have != hash {
				return dirdb.ErrConflict
			}
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		switch err := tx.QueryRowContext(ctx,
			`SELECT hash FROM directory_tombstones WHERE endpoint = ? AND version = ?`,
			endpoint, version).Scan(&have); {
		case err == nil:
			if have != hash {
				return dirdb.ErrConflict
			}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO directory_versions (endpoint, version, hash, canonical) VALUES (?, ?, ?, ?)`,
			endpoint, version, hash, canonical); err != nil {
			return err
		}
		inserted = true
		return bump(ctx, tx)
	})
	return inserted, err
}

// Activate makes version the endpoint's active version after checking its
// hash. changed is false when it already was active.
func (s *Directory) Activate(ctx context.Context, endpoint, version, hash string) (changed bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		var have string
		var active bool
		err := tx.QueryRowContext(ctx,
			`SELECT hash, active FROM directory_versions WHERE endpoint = ? AND version = ?`,
			endpoint, version).Scan(&have, &active)
		if errors.Is(err, sql.ErrNoRows) {
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
		// Two statements: the partial unique index is checked row by row.
		if _, err := tx.ExecContext(ctx,
			`UPDATE directory_versions SET active = 0 WHERE endpoint = ? AND active = 1`, endpoint); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE directory_versions SET active = 1 WHERE endpoint = ? AND version = ? AND hash = ?`,
			endpoint, version, hash); err != nil {
			return err
		}
		changed = true
		return bump(ctx, tx)
	})
	return changed, err
}

// Deactivate clears the endpoint's active version. changed is false when
// none was active; dirdb.ErrNotFound when the endpoint has no versions.
func (s *Directory) Deactivate(ctx context.Context, endpoint string) (changed bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if ok, err := exists(ctx, tx, endpoint); err != nil {
			return err
		} else if !ok {
			return dirdb.ErrNotFound
		}
		res, err := tx.ExecContext(ctx,
			`UPDATE directory_versions SET active = 0 WHERE endpoint = ? AND active = 1`, endpoint)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		changed = true
		return bump(ctx, tx)
	})
	return changed, err
}

// Versions lists an endpoint's versions in registration order, without
// canonical bytes.
func (s *Directory) Versions(ctx context.Context, endpoint string) ([]dirdb.Version, error) {
	rows, err := s.r.QueryContext(ctx,
		`SELECT version, hash, active FROM directory_versions WHERE endpoint = ? ORDER BY seq`, endpoint)
	out, err := collect(rows, err, func(row scanner) (dirdb.Version, error) {
		v := dirdb.Version{Endpoint: endpoint}
		if err := row.Scan(&v.Version, &v.Hash, &v.Active); err != nil {
			return v, err
		}
		return v, nil
	})
	if err != nil {
		return nil, fmt.Errorf("dirsqlite: versions: %w", err)
	}
	return out, nil
}

// RemoveVersion deletes an inactive version and tombstones it.
func (s *Directory) RemoveVersion(ctx context.Context, endpoint, version string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var hash string
		var active bool
		err := tx.QueryRowContext(ctx,
			`SELECT hash, active FROM directory_versions WHERE endpoint = ? AND version = ?`,
			endpoint, version).Scan(&hash, &active)
		if errors.Is(err, sql.ErrNoRows) {
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
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM directory_versions WHERE endpoint = ? AND version = ? AND active = 0`,
			endpoint, version); err != nil {
			return err
		}
		return bump(ctx, tx)
	})
}

// RemoveEndpoint deletes and tombstones every version of the endpoint,
// active or not. expect is the set of versions the caller checked (for
// retained-task references); if the endpoint's versions differ, nothing is
// removed and dirdb.ErrChanged is returned.
func (s *Directory) RemoveEndpoint(ctx context.Context, endpoint string, expect []string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx,
			`SELECT version, hash FROM directory_versions WHERE endpoint = ?`, endpoint)
		have, err := collect(rows, err, func(row scanner) (dirdb.Version, error) {
			var v dirdb.Version
			return v, row.Scan(&v.Version, &v.Hash)
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
		if _, err := tx.ExecContext(ctx, `DELETE FROM directory_versions WHERE endpoint = ?`, endpoint); err != nil {
			return err
		}
		return bump(ctx, tx)
	})
}

// Generation returns the store's change generation.
func (s *Directory) Generation(ctx context.Context) (int64, error) {
	var g int64
	if err := s.r.QueryRowContext(ctx, `SELECT generation FROM change_generation WHERE id = 1`).Scan(&g); err != nil {
		return 0, fmt.Errorf("dirsqlite: generation: %w", err)
	}
	return g, nil
}

// Load reads the generation and every version in one read transaction, so
// they are consistent, and returns the versions without canonical bytes.
// For each version need accepts, it then calls content with the version's
// canonical bytes, one at a time so that a large directory is never held
// twice in memory (the caller already holds the others: a version's content
// never changes). content must not retain the slice's backing array past
// the call unless it owns it: each call gets a fresh slice.
func (s *Directory) Load(ctx context.Context, need func(endpoint, version, hash string) bool, content func(v dirdb.Version) error) (gen int64, out []dirdb.Version, err error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	// go-sqlite3 watches a cancellable context on every row step, which
	// triples the cost of this bounded scan; it is not worth interrupting.
	ctx = context.WithoutCancel(ctx)
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, nil, fmt.Errorf("dirsqlite: load: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT generation FROM change_generation WHERE id = 1`).Scan(&gen); err != nil {
		return 0, nil, fmt.Errorf("dirsqlite: load: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT endpoint, version, hash, active FROM directory_versions`)
	if err != nil {
		return 0, nil, fmt.Errorf("dirsqlite: load: %w", err)
	}
	var needed []int
	err = each(rows, nil, func(row scanner) error {
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
		return 0, nil, fmt.Errorf("dirsqlite: load: %w", err)
	}
	if len(needed) == 0 {
		return gen, out, nil
	}
	if len(needed) > 64 {
		// Many missing (first load): one scan beats point queries.
		at := make(map[[2]string]int, len(needed))
		for _, i := range needed {
			at[[2]string{out[i].Endpoint, out[i].Version}] = i
		}
		rows, err := tx.QueryContext(ctx, `SELECT endpoint, version, canonical FROM directory_versions`)
		if err != nil {
			return 0, nil, fmt.Errorf("dirsqlite: load: %w", err)
		}
		var cerr error // content's own error, passed on as it is
		err = each(rows, nil, func(r scanner) error {
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
			return 0, nil, fmt.Errorf("dirsqlite: load: %w", err)
		}
		return gen, out, nil
	}
	stmt, err := tx.PrepareContext(ctx, `SELECT canonical FROM directory_versions WHERE endpoint = ? AND version = ?`)
	if err != nil {
		return 0, nil, fmt.Errorf("dirsqlite: load: %w", err)
	}
	defer stmt.Close()
	for _, i := range needed {
		row := out[i]
		if err := stmt.QueryRowContext(ctx, row.Endpoint, row.Version).Scan(&row.Canonical); err != nil {
			return 0, nil, fmt.Errorf("dirsqlite: load: %w", err)
		}
		if err := content(row); err != nil {
			return 0, nil, err
		}
	}
	return gen, out, nil
}

func (s *Directory) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dirsqlite: begin: %w", err)
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		if isSentinel(err) {
			return err
		}
		return fmt.Errorf("dirsqlite: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("dirsqlite: commit: %w", err)
	}
	return nil
}

func isSentinel(err error) bool {
	return errors.Is(err, dirdb.ErrNotFound) || errors.Is(err, dirdb.ErrConflict) || errors.Is(err, dirdb.ErrHashMismatch) ||
		errors.Is(err, dirdb.ErrActive) || errors.Is(err, dirdb.ErrChanged)
}

func exists(ctx context.Context, tx *sql.Tx, endpoint string) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM directory_versions WHERE endpoint = ?`, endpoint).Scan(&n)
	return n > 0, err
}

// tombstone records a removal; a tombstone for the same hash may already
// exist from an earlier removal of identical content.
func tombstone(ctx context.Context, tx *sql.Tx, endpoint, version, hash string) error {
	_, err := tx.ExecContext(ctx,
		`INSERT INTO directory_tombstones (endpoint, version, hash) VALUES (?, ?, ?)
		 ON CONFLICT (endpoint, version) DO NOTHING`, endpoint, version, hash)
	return err
}

func bump(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `UPDATE change_generation SET generation = generation + 1 WHERE id = 1`)
	return err
}

var _ dirdb.Fetcher = (*Directory)(nil)

// Canonical reads one version's canonical bytes from the read pool.
func (s *Directory) Canonical(ctx context.Context, endpoint, version string) ([]byte, error) {
	var c []byte
	err := s.r.QueryRowContext(ctx, `SELECT canonical FROM directory_versions WHERE endpoint = ? AND version = ?`, endpoint, version).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dirdb.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("dirsqlite: canonical: %w", err)
	}
	return c, nil
}
