package sqlite

import "database/sql"

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// collect reads every row of rows (the result of a query that failed with
// err, if err is set) with scan and closes rows: the one loop over rows in
// this package.
func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanOne scans a single column.
func scanOne[T any](r scanner) (T, error) {
	var v T
	err := r.Scan(&v)
	return v, err
}
