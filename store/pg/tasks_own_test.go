package pg_test

import (
	"testing"

	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestTasksOwn(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExerciseOwnTasks(t, func(t *testing.T) taskdb.Driver {
		_, d := openTasks(t, srv.NewDatabase(t))
		return d
	})
}
