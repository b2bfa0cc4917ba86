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

// CodePrefixACC qualifies the failure codes of agent-control-center
// connectors (accbridge, seed 002): the seed's numeric error codes mapped
// to stable names, plus the bridge's own ACC outcomes.
const CodePrefixACC = "acc:"

// The seed's error codes 4001–5002 as failure codes (ACCCode maps them).
const (
	CodeACCInvalidRequest  = CodePrefixACC + "invalid-request"          // 4001
	CodeACCUnknownType     = CodePrefixACC + "unknown-message-type"     // 4002
	CodeACCAgentNotFound   = CodePrefixACC + "agent-not-found"          // 4003
	CodeACCRunNotFound     = CodePrefixACC + "run-not-found"            // 4004
	CodeACCAgentBusy       = CodePrefixACC + "agent-busy"               // 4005
	CodeACCQuotaExceeded   = CodePrefixACC + "quota-exceeded"           // 4006
	CodeACCUnauthorized    = CodePrefixACC + "unauthorized-action"      // 4007
	CodeACCApprovalDenied  = CodePrefixACC + "approval-denied"          // 4008
	CodeACCConnectorError  = CodePrefixACC + "connector-internal-error" // 5001
	CodeACCAdapterError    = CodePrefixACC + "adapter-error"            // 5002
	CodeACCUnknownError    = CodePrefixACC + "error"                    // any other code
	CodeACCAcceptTimeout   = CodePrefixACC + "accept-timeout"
	CodeACCToolNotDeclared = CodePrefixACC + "tool-not-declared"
	CodeACCApprovalExpired = CodePrefixACC + "approval-expired"
)

var accCodes = map[int]string{
	4001: CodeACCInvalidRequest, 4002: CodeACCUnknownType, 4003: CodeACCAgentNotFound,
	4004: CodeACCRunNotFound, 4005: CodeACCAgentBusy, 4006: CodeACCQuotaExceeded,
	4007: CodeACCUnauthorized, 4008: CodeACCApprovalDenied, 5001: CodeACCConnectorError,
	5002: CodeACCAdapterError,
}

// ACCCode is the failure code of a connector's numeric error code; codes
// outside the seed's table are CodeACCUnknownError.
func ACCCode(n int) string {
	if c, ok := accCodes[n]; ok {
		return c
	}
	return CodeACCUnknownError
}
