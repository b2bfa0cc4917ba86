package tasks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// An engine admits an invocation durably, runs it on the endpoint's
// backend, notifies each lifecycle event and keeps the result for
// recovery.
func Example() {
	dir, err := os.MkdirTemp("", "tasks-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "gateway.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()

	const weather, planner = "weather@agents.example", "planner@agents.example"
	directory := taskstest.NewDirectory()
	m := taskstest.Manifest(weather, "1.4.0", taskstest.ToolSpec{Name: "forecast.get"})
	directory.Add(m, true)
	backend := taskstest.New(tasks.Features{}) // unscripted tools echo their arguments
	events := taskstest.NewRecorder()
	eng, err := tasks.New(tasks.Config{
		Driver:    sqlite.NewTasks(db),
		Directory: directory,
		Policy:    taskstest.NewPolicy([2]string{planner, weather}),
		Backends: func(endpoint string) (tasks.Backend, bool) {
			return backend, endpoint == weather
		},
		Notifier: events,
	})
	if err != nil {
		panic(err)
	}
	if err := eng.Start(ctx); err != nil {
		panic(err)
	}
	defer eng.Close()

	acc, err := eng.Admit(ctx, tasks.Invocation{
		Caller: planner, Route: planner + "/worker", Endpoint: weather,
		RequestID: "req-91a6d2f49c514f44a2d223f0f97bd9fe", Tool: "forecast.get",
		APIVersion: m.Version, ManifestHash: m.Hash,
		Arguments: []byte(`{"city":"Riga"}`), MediaType: "application/json",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("accepted at revision", acc.Revision)

	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := events.Wait(wait, acc.TaskID, "completed"); err != nil {
		panic(err)
	}
	for _, ev := range events.Events(acc.TaskID) {
		fmt.Println(ev.Revision, ev.Type)
	}
	res, err := eng.Result(ctx, planner, weather, acc.TaskID)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.State, res.State.Terminal())
	// Output:
	// accepted at revision 0
	// 1 status
	// 2 completed
	// completed true
}
