// Package migrate collects migration sets for the store drivers
// (store/sqlite, store/pg): each driver keeps one folder of migrations,
// migrations/NNNN_name.sql, embedded in the binary, and applies the
// pending ones in name order when it opens the database.
//
// A migration's identity, recorded in the database's schema_migrations
// table, is its path in its set's FS, "migrations/NNNN_name.sql": the
// string every earlier release recorded (when the files lived beside
// each feature's driver), so a database made then opens without applying
// anything twice.
package migrate

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// Set is a migration set: the files migrations/*.sql of FS. A driver has
// one (its migrations folder); tests add their own.
type Set struct {
	Owner string // for errors
	FS    fs.FS
}

// Migration is one file of a set.
type Migration struct {
	Name  string // identity, e.g. "migrations/0002_tasks.sql"
	Owner string
	FS    fs.FS
}

// Body reads the migration's SQL.
func (m Migration) Body() (string, error) {
	b, err := fs.ReadFile(m.FS, m.Name)
	if err != nil {
		return "", fmt.Errorf("migration %s of %s: %w", m.Name, m.Owner, err)
	}
	return string(b), nil
}

// Collect lists the migrations of sets in one name order (not set by
// set), refusing a name that two sets (or one set twice) contain. prefix
// starts every error ("store", "pgstore").
func Collect(prefix string, sets ...Set) ([]Migration, error) {
	var all []Migration
	seen := map[string]string{}
	for _, set := range sets {
		if set.FS == nil {
			return nil, fmt.Errorf("%s: migration set %q has no files", prefix, set.Owner)
		}
		names, err := fs.Glob(set.FS, "migrations/*.sql")
		if err != nil {
			return nil, fmt.Errorf("%s: migrations of %s: %w", prefix, set.Owner, err)
		}
		for _, name := range names {
			if other, ok := seen[name]; ok {
				return nil, fmt.Errorf("%s: migration %s is in both %s and %s", prefix, name, other, set.Owner)
			}
			seen[name] = set.Owner
			all = append(all, Migration{Name: name, Owner: set.Owner, FS: set.FS})
		}
	}
	slices.SortFunc(all, func(a, b Migration) int { return strings.Compare(a.Name, b.Name) })
	return all, nil
}
