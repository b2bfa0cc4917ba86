// Package postgres tests serve, invoke, replay and restart on PostgreSQL end to end; an outage.
package postgres
