package pg

import "github.com/jackc/pgx/v5"

// collect reads every row of rows (the result of a query that failed with
// err, if err is set) with scan and closes rows: pgx.CollectRows, taking
// the query's error too.
func collect[T any](rows pgx.Rows, err error, scan func(pgx.CollectableRow) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scan)
}
