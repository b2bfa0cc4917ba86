package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/a2afront/frontdb"
	"github.com/agentgw/agentgw/store/sqlite"
)

// The A2A front's file: configs bounded per task, the outbox delivered
// per config in order, a deleted config takes its notifications along,
// and everything is still there after the file is opened again.
func TestA2AFrontStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "push.db")
	s, err := sqlite.OpenA2AFront(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the file holds secrets; its mode: %v %v", fi.Mode(), err)
	}
	put := func(task, id string) error {
		return s.PutConfig(ctx, frontdb.Config{TaskID: task, ConfigID: id, Agent: "a@x", Body: []byte(`{"id":"` + id + `"}`)}, 2)
	}
	if err := errors.Join(put("t1", "c1"), put("t1", "c2"), put("t1", "c1"), put("t2", "c1")); err != nil {
		t.Fatal(err)
	}
	if err := put("t1", "c3"); !errors.Is(err, frontdb.ErrTooMany) {
		t.Fatalf("a third config: %v", err)
	}
	now := time.Now()
	for i, body := range []string{"n1", "n2"} {
		if _, err := s.Enqueue(ctx, "t1", []byte(body), i == 1, now, 100); err != nil {
			t.Fatal(err)
		}
	}
	due, err := s.Due(ctx, now, 10)
	if err != nil || len(due) != 2 || string(due[0].Body) != "n1" || string(due[1].Body) != "n1" {
		t.Fatalf("due: the head of each config: %+v %v", due, err)
	}
	// c1's head fails and waits; c2's head goes through, so n2 is next.
	if err := s.Retry(ctx, due[0].ID, 1, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delivered(ctx, due[1].ID); err != nil {
		t.Fatal(err)
	}
	due, _ = s.Due(ctx, now, 10)
	if len(due) != 1 || due[0].ConfigID != "c2" || string(due[0].Body) != "n2" {
		t.Fatalf("after one failure and one delivery: %+v", due)
	}
	followed, _ := s.Followed(ctx)
	if len(followed) != 1 || followed[0].TaskID != "t2" {
		t.Fatalf("t1 had its final notification queued; followed: %+v", followed)
	}
	s.Close()

	s, err = sqlite.OpenA2AFront(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	due, _ = s.Due(ctx, now.Add(2*time.Hour), 10)
	if len(due) != 2 || due[1].ConfigID != "c1" || due[1].Attempts != 1 || string(due[1].Body) != "n1" {
		t.Fatalf("after reopening: %+v", due)
	}
	if err := s.DeleteConfig(ctx, "t1", "c1"); err != nil {
		t.Fatal(err)
	}
	due, _ = s.Due(ctx, now.Add(2*time.Hour), 10)
	if len(due) != 1 || due[0].ConfigID != "c2" {
		t.Fatalf("a deleted config's notifications stay: %+v", due)
	}
	// The bound drops the oldest.
	if dropped, err := s.Enqueue(ctx, "t2", []byte("x"), false, now, 1); err != nil || dropped != 1 {
		t.Fatalf("over the bound: dropped %d, %v", dropped, err)
	}
	if n, err := s.Prune(ctx, now.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("prune: %d %v (c2 of t1 is done and has nothing queued)", n, err)
	}
}

// The task index: upserts keep the first context id and the latest
// update; only the max most recent entries stay.
func TestA2AFrontStoreTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlite.OpenA2AFront(ctx, filepath.Join(t.TempDir(), "front.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Now()
	err = s.PutTasks(ctx, []frontdb.Task{
		{Agent: "a@x", ID: "t1", ContextID: "c1", Seq: 1, Updated: t0},
		{Agent: "a@x", ID: "t2", Seq: 2, Updated: t0.Add(time.Second)},
		{Agent: "a@x", ID: "t3", Seq: 3, Updated: t0.Add(2 * time.Second)},
	}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutTasks(ctx, []frontdb.Task{{Agent: "a@x", ID: "t1", ContextID: "other", Seq: 1, Updated: t0.Add(3 * time.Second)}}, 2); err != nil {
		t.Fatal(err)
	}
	ts, err := s.Tasks(ctx, 10)
	if err != nil || len(ts) != 2 || ts[0].ID != "t1" || ts[0].ContextID != "c1" || ts[1].ID != "t3" {
		t.Fatalf("tasks: %+v %v", ts, err)
	}
}

// Without a path the store is in memory, one per open.
func TestA2AFrontStoreMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, err := sqlite.OpenA2AFront(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlite.OpenA2AFront(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.PutConfig(ctx, frontdb.Config{TaskID: "t", ConfigID: "c", Agent: "a@x", Body: []byte(`{}`)}, 1); err != nil {
		t.Fatal(err)
	}
	if cs, _ := b.Configs(ctx, "t"); len(cs) != 0 {
		t.Fatalf("two memory stores share configs: %+v", cs)
	}
	if cs, _ := a.Configs(ctx, "t"); len(cs) != 1 {
		t.Fatalf("the memory store lost its config: %+v", cs)
	}
}
