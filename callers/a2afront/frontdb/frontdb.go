// Package frontdb defines the storage contract of the A2A front's own
// durable state (`agentgw a2a --push-outbox FILE`): the push notification
// configs clients registered, the outbox of notifications not yet
// delivered and the index of the tasks the front started (ListTasks,
// context ids), so they survive a restart of the front (kill -9 included).
// The front is an XMPP client process with no gateway store of its own;
// store/sqlite implements this over a file of the front's.
package frontdb

import (
	"context"
	"errors"
	"time"
)

// Config is one push notification config of a task, as the client gave
// it (Body: the A2A 1.0 PushConfig JSON, token and credentials included).
type Config struct {
	TaskID   string
	ConfigID string
	Agent    string // bare JID of the agent the task runs at
	Body     []byte
	// Done: the task's final notification has been queued; the config is
	// kept for Get/List but its task is no longer followed.
	Done bool
}

// Notification is one queued delivery: a StreamResponse body for one
// config (a copy of the config is kept with it, so a notification already
// queued is delivered as configured when it was made).
type Notification struct {
	ID       int64
	TaskID   string
	ConfigID string
	Config   []byte
	Body     []byte
	Attempts int
	Created  time.Time
}

// Task is one entry of the front's task index.
type Task struct {
	Agent     string // bare JID
	ID        string
	ContextID string // the client's; empty for none
	Seq       uint64 // creation order
	Updated   time.Time
}

// ErrTooMany is PutConfig's answer when the task has max configs already.
var ErrTooMany = errors.New("frontdb: the task has too many push configs")

// Store is the front's durable push state.
type Store interface {
	// PutConfig stores a config (replacing one of the same task and id),
	// refusing a new one past max configs per task.
	PutConfig(ctx context.Context, c Config, max int) error
	// Configs lists a task's configs by id.
	Configs(ctx context.Context, taskID string) ([]Config, error)
	// Followed lists the configs whose task is not done (one per task is
	// enough to follow it again after a restart).
	Followed(ctx context.Context) ([]Config, error)
	// DeleteConfig removes a config and its undelivered notifications
	// (idempotent).
	DeleteConfig(ctx context.Context, taskID, configID string) error
	// Enqueue queues body for every config of the task in one transaction,
	// and with final marks them done. It drops the oldest notifications
	// past maxPending and reports how many it dropped.
	Enqueue(ctx context.Context, taskID string, body []byte, final bool, at time.Time, maxPending int) (dropped int, err error)
	// Due lists up to limit notifications due at now, oldest first, only
	// the oldest pending one of each config (so each config's go out in
	// order).
	Due(ctx context.Context, now time.Time, limit int) ([]Notification, error)
	// Delivered removes a notification the receiver took.
	Delivered(ctx context.Context, id int64) error
	// Retry records a failed attempt and when to try again.
	Retry(ctx context.Context, id int64, attempts int, next time.Time) error
	// GiveUp removes a notification that will not be delivered.
	GiveUp(ctx context.Context, id int64) error
	// Prune removes configs done before cutoff (with nothing queued).
	Prune(ctx context.Context, cutoff time.Time) (int, error)

	// PutTasks upserts task index entries and keeps only the max most
	// recently updated.
	PutTasks(ctx context.Context, ts []Task, max int) error
	// Tasks lists up to max entries, most recently updated first.
	Tasks(ctx context.Context, max int) ([]Task, error)
	Close() error
}
