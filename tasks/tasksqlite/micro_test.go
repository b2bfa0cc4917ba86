package tasksqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

func TestMicro(t *testing.T) {
	_, d := open(t)
	for w := 0; w < 2; w++ {
	tx, _ := d.Begin(context.Background())
	var tasksL []*taskdb.Task
	st := time.Now()
	for i := 0; i < 1000; i++ {
		task := newTask()
		tx.InsertTask(task)
		tasksL = append(tasksL, task)
	}
	t.Logf("insert %v/op", time.Since(st)/1000)
	st = time.Now()
	for i := 0; i < 1000; i++ {
		tx.Savepoint(); tx.Release()
	}
	t.Logf("savepoint %v/op", time.Since(st)/1000)
	st = time.Now()
	for _, task := range tasksL {
		tx.Task(task.ID)
	}
	t.Logf("select %v/op", time.Since(st)/1000)
	st = time.Now()
	for _, task := range tasksL {
		n := *task
		n.State, n.Revision = taskdb.Running, 1
		if ok, err := tx.UpdateTask(&n, 0, taskdb.Accepted); !ok {
			t.Fatal(err)
		}
	}
	t.Logf("update %v/op", time.Since(st)/1000)
	st = time.Now()
	for _, task := range tasksL {
		if err := tx.AppendEvent(&taskdb.Event{TaskID: task.ID, Revision: 1, EventID: ids.New("evt-"), Type: "status", Payload: []byte(`{"state":"running","updatedAt":"2026-07-27T19:14:01Z"}`), Created: now}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("event %v/op", time.Since(st)/1000)
	st = time.Now()
	tx.Commit()
	t.Logf("commit %v", time.Since(st))
	}
}
