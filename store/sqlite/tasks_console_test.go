package sqlite_test

import (
	"testing"

	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

func TestTasksRecent(t *testing.T) {
	t.Parallel()
	storetest.ExerciseRecent(t, func(t *testing.T) taskdb.Driver {
		_, d := openTasks(t)
		return d
	})
}
