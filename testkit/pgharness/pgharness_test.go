package pgharness

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestServerDatabasesAndRestart(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	a, b := s.NewDatabase(t), s.NewDatabase(t)
	if a == b {
		t.Fatal("two tests share a database")
	}
	c, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `CREATE TABLE x (v int); INSERT INTO x VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	// The other database is empty.
	c, err = pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `SELECT v FROM x`); err == nil {
		t.Fatal("a table leaked into another database")
	}
	c.Close(ctx)
	// A crash and a restart keep the committed data (the data directory
	// survives; the server recovers it).
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c, err = pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v int
	if err := c.QueryRow(ctx, `SELECT v FROM x`).Scan(&v); err != nil || v != 7 {
		t.Fatalf("after restart: %d %v", v, err)
	}
}

func TestPasswordRequired(t *testing.T) {
	s := Start(t, Options{Password: "harness-Pa55"})
	ctx := context.Background()
	dsn := s.NewDatabase(t)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	wrong := strings.Replace(dsn, "harness-Pa55", "wrong", 1)
	if c, err := pgx.Connect(ctx, wrong); err == nil {
		c.Close(ctx)
		t.Fatal("a wrong password was accepted")
	}
}
