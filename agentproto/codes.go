package agentproto

import "strconv"

// Task failure codes, the code of a failed event's error object. The first
// three are the spec's reserved codes (Error Handling, "Reserved task
// failure codes"); the gateway's own are namespace qualified and sent only
// where no reserved code says what happened. docs/failure-codes.md maps
// every code to when it is sent and whether it is retryable.
const (
	// CodeDeadlineExpired: the task deadline passed before a result.
	CodeDeadlineExpired = "deadline-expired"
	// CodeInternalError: the executor or backend failed unexpectedly.
	CodeInternalError = "internal-error"
	// CodeUnavailable: a required runtime or downstream service (an MCP
	// server, a connector, the endpoint's backend) is temporarily
	// unavailable. Always retryable.
	CodeUnavailable = "unavailable"

	CodeInterrupted               = "agentgw:interrupted"
	CodeInvalidOutput             = "agentgw:invalid-output"
	CodeResultTooLarge            = "agentgw:result-too-large"
	CodeInputExpired              = "agentgw:input-expired"
	CodeManifestUnavailable       = "agentgw:manifest-unavailable"
	CodeUnsupportedSampling       = "agentgw:unsupported-sampling"
	CodeUnsupportedRoots          = "agentgw:unsupported-roots"
	CodeUnsupportedURLElicitation = "agentgw:unsupported-url-elicitation"
	CodeUnattributedElicitation   = "agentgw:unattributed-elicitation"
)

// Code prefixes of failures reported by a backend in its own terms.
const (
	// CodePrefixMCP + a JSON-RPC error number: the MCP server answered the
	// call with that error.
	CodePrefixMCP = "mcp:"
	// CodePrefixXAgent + the connector's code: a connector reported its
	// own error.
	CodePrefixXAgent = "xagent:"
)

// MCPCode is the failure code of an MCP JSON-RPC error n.
func MCPCode(n int64) string { return CodePrefixMCP + strconv.FormatInt(n, 10) }

// XAgentCode is the failure code of a connector's own error code.
func XAgentCode(code string) string { return CodePrefixXAgent + code }

// Failure codes of the OpenAgentNetwork bridge (docs/oan-bridge.md).
const (
	// CodeOANNoReply: OAN accepted a chat message (202) but no reply
	// arrived within the bridge's reply timeout — the protocol's silent
	// failure (§4). The message is never re-sent automatically.
	CodeOANNoReply = "agentgw:oan-no-reply"
	// CodeOANNotOwner: the tool acts for the OAN account's owner and the
	// caller is not the configured owner.
	CodeOANNotOwner = "agentgw:oan-not-owner"
	// CodeOANRefused: OAN refused the request (a 4xx other than 401).
	CodeOANRefused = "agentgw:oan-refused"
)
