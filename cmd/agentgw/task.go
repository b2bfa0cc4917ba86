package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
)

func init() {
	register(command{name: "task", summary: "query, cancel or answer a task: task state|result|cancel|input AGENT_JID TASK_ID", run: runTask})
}

const taskSynopsis = `task state  --jid JID [--json] AGENT_JID TASK_ID
       agentgw task result --jid JID [--json] AGENT_JID TASK_ID
       agentgw task cancel --jid JID [--json] [--reason TEXT] [--revision N] AGENT_JID TASK_ID
       agentgw task input  --jid JID [--json] --request-id ID --input JSON [--revision N] AGENT_JID TASK_ID

Without --revision, cancel and input use the task's current revision.
--json prints the answer as one JSON object (state: the task's state
fields; result: state, revision and the terminal event's payload as the
gateway sent it; cancel and input: the accepted revision).`

func runTask(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, err := subcommand(args, taskSynopsis, "missing subcommand: state, result, cancel or input", stdout)
	if err != nil {
		return err
	}
	fs := newFlags("task "+sub, taskSynopsis, stdout)
	cf := addCallerFlags(fs)
	reason := fs.String("reason", "", "cancellation reason")
	revision := fs.Int64("revision", -1, "expected revision (default: current)")
	requestID := fs.String("request-id", "", "input request id (input)")
	input := fs.String("input", "", "input JSON (input)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	switch sub {
	case "state", "result", "cancel", "input":
	default:
		return usagef("unknown subcommand %q", sub)
	}
	if len(pos) != 2 {
		return usagef("task %s takes AGENT_JID and TASK_ID", sub)
	}
	ep, err := jid.Parse(pos[0])
	if err != nil || ep.Localpart() == "" {
		return usagef("%q is not an agent JID", pos[0])
	}
	taskID := pos[1]
	if sub == "input" && (*requestID == "" || !json.Valid([]byte(*input))) {
		return usagef("input needs --request-id and --input with valid JSON")
	}
	s, err := cf.connect(ctx, stderr)
	if err != nil {
		return err
	}
	defer s.Close()
	c := s.client
	current := func() (int64, error) {
		if *revision >= 0 {
			return *revision, nil
		}
		st, err := c.State(ctx, ep, taskID)
		if err != nil {
			return 0, err
		}
		return st.Revision, nil
	}
	switch sub {
	case "state":
		st, err := c.State(ctx, ep, taskID)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, stateJSON(st))
		}
		printState(stdout, st)
	case "result":
		r, err := c.Result(ctx, ep, taskID)
		if err != nil {
			if agentclient.Condition(err) == "unexpected-request" {
				return exitError{code: 1, msg: "the task has not settled yet; try `agentgw task state`"}
			}
			return err
		}
		if *asJSON {
			return printJSON(stdout, struct {
				State    string          `json:"state"`
				Revision int64           `json:"revision"`
				Payload  json.RawMessage `json:"payload"`
			}{string(r.State), r.Revision, r.Payload})
		}
		fmt.Fprintf(stdout, "state %s at revision %d\n", r.State, r.Revision)
		printPayload(stdout, r.State, r.Payload)
	case "cancel":
		rev, err := current()
		if err != nil {
			return err
		}
		var rp *string
		if *reason != "" {
			rp = reason
		}
		acc, err := c.Cancel(ctx, ep, taskID, rev, rp)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, accepted{acc})
		}
		fmt.Fprintf(stdout, "cancellation accepted at revision %d; cancellation is advisory, the task settles on its own\n", acc)
	case "input":
		rev, err := current()
		if err != nil {
			return err
		}
		acc, err := c.ProvideInput(ctx, ep, taskID, *requestID, rev, json.RawMessage(*input))
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, accepted{acc})
		}
		fmt.Fprintf(stdout, "input accepted at revision %d\n", acc)
	}
	return nil
}

// accepted is the --json answer of task cancel and task input.
type accepted struct {
	AcceptedRevision int64 `json:"acceptedRevision"`
}

// stateJSON is task state --json: the state fields under stable names,
// the pending input request as the gateway sent it.
func stateJSON(st *agentclient.TaskState) any {
	return struct {
		TaskID          string          `json:"taskId"`
		Endpoint        string          `json:"endpoint"`
		APIVersion      string          `json:"apiVersion"`
		ManifestHash    string          `json:"manifestHash"`
		State           string          `json:"state"`
		Revision        int64           `json:"revision"`
		Created         string          `json:"created"`
		Updated         string          `json:"updated"`
		RetainUntil     string          `json:"retainUntil"`
		Deadline        string          `json:"deadline,omitempty"`
		ResultAvailable bool            `json:"resultAvailable"`
		PendingInput    json.RawMessage `json:"pendingInput,omitempty"`
	}{st.TaskID, st.Endpoint, st.APIVersion, st.ManifestHash, string(st.State), st.Revision, st.Created, st.Updated,
		st.RetainUntil, st.Deadline, st.ResultAvailable, st.PendingInput}
}

func printState(w io.Writer, st *agentclient.TaskState) {
	fmt.Fprintf(w, "task        %s\n", st.TaskID)
	fmt.Fprintf(w, "endpoint    %s (version %s, manifest %s)\n", st.Endpoint, st.APIVersion, st.ManifestHash)
	fmt.Fprintf(w, "state       %s at revision %s\n", st.State, strconv.FormatInt(st.Revision, 10))
	fmt.Fprintf(w, "created     %s\nupdated     %s\nretained to %s\n", st.Created, st.Updated, st.RetainUntil)
	if st.Deadline != "" {
		fmt.Fprintf(w, "deadline    %s\n", st.Deadline)
	}
	fmt.Fprintf(w, "result      available=%v\n", st.ResultAvailable)
	if len(st.PendingInput) > 0 {
		fmt.Fprintf(w, "pending input %s\n", st.PendingInput)
	}
}
