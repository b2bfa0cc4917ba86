package sqlite

import "database/sql"

// scanner is a *sql.Row or *sql.Rows.
type scanner = interface{ Scan(dest ...any) error }

// each calls f for every row of rows (the result of a query that failed
// with err, if err is set) and closes rows: the one loop over rows in this
// package.
func each(rows *sql.Rows, err error, f func(scanner) error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// collect reads every row of rows with scan, as each does.
func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	var out []T
	err = each(rows, err, func(r scanner) error {
		v, err := scan(r)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanOne scans a single column.
func scanOne[T any](r scanner) (T, error) {
	var v T
	err := r.Scan(&v)
	return v, err
}
