package a2afront

import (
	"slices"
	"testing"

	"github.com/agentgw/agentgw/internal/oauthrs"
)

// The operations of A2A requests, for --scope-for.
func TestA2AOps(t *testing.T) {
	t.Parallel()
	r, i, s := []oauthrs.Op{oauthrs.OpRead}, []oauthrs.Op{oauthrs.OpInvoke}, []oauthrs.Op{oauthrs.OpSteer}
	for m, want := range map[string][]oauthrs.Op{
		"message/send": i, "SendStreamingMessage": i, "GetTask": r, "tasks/resubscribe": r, "ListTasks": r,
		"GetExtendedAgentCard": r, "CancelTask": s, "tasks/cancel": s, "tasks/pushNotificationConfig/set": s,
		"CreateTaskPushNotificationConfig": s, "ListTaskPushNotificationConfigs": s, "DeleteTaskPushNotificationConfig": s,
		"no/such": oauthrs.Ops, "": oauthrs.Ops,
	} {
		if got := rpcOp(m); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", m, got, want)
		}
	}
	for req, want := range map[[2]string][]oauthrs.Op{
		{"POST", "message:send"}: i, {"POST", "v1/message:stream"}: i, {"GET", "tasks/t1"}: r, {"GET", "tasks"}: r,
		{"GET", "tasks/t1:subscribe"}: r, {"POST", "tasks/t1:cancel"}: s, {"POST", "v1/tasks/t1:cancel"}: s,
		{"POST", "tasks/t1/pushNotificationConfigs"}: s, {"GET", "tasks/t1/pushNotificationConfigs/c"}: s,
		{"GET", "extendedAgentCard"}: r, {"GET", "v1/card"}: r, {"POST", "tasks/t1:evil"}: oauthrs.Ops, {"POST", "other"}: oauthrs.Ops,
	} {
		if got := restOp(req[0], req[1]); !slices.Equal(got, want) {
			t.Errorf("%s %s: %v, want %v", req[0], req[1], got, want)
		}
	}
}
