package pg

import "github.com/jackc/pgx/v5"

// each calls f for every row of rows (the result of a query that failed
// with err, if err is set) and closes rows: the one loop over rows in this
// package.
func each(rows pgx.Rows, err error, f func(pgx.Row) error) error {
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
func collect[T any](rows pgx.Rows, err error, scan func(pgx.Row) (T, error)) ([]T, error) {
	var out []T
	err = each(rows, err, func(r pgx.Row) error {
		v, err := scan(r)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
