package federation

import "github.com/agentgw/agentgw/agentproto/ns"

// OpOf maps an IQ payload to its rate-limit budget. The gateway's router
// and agentgw host's use the same mapping.
func OpOf(space, local string) Op {
	switch {
	case space == ns.Task && local == "invoke":
		return OpInvoke
	case space == ns.Task:
		return OpInput
	case space == ns.Commands:
		// A command stage may admit a task: limited like invoke.
		return OpInvoke
	case space == ns.API && (local == "manifest-request" || local == "schema-request"):
		return OpSchema
	}
	return OpDiscovery
}
