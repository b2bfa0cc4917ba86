package sqlite_test

import (
	"testing"

	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

func TestTasksOwn(t *testing.T) {
	t.Parallel()
	storetest.ExerciseOwnTasks(t, func(t *testing.T) taskdb.Driver {
		_, d := openTasks(t)
		return d
	})
}
