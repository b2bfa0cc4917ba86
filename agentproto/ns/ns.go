// Package ns holds the XML namespaces, feature vars, form types and node
// prefixes of the XMPP Agent Gateway protocol and the XEPs it builds on, so
// that the gateway, its clients and its tests spell them once.
package ns

// Agent Gateway protocol.
const (
	Directory       = "urn:xmpp:agent-directory:0"
	API             = "urn:xmpp:agent-api:0"
	APIManifest     = "urn:xmpp:agent-api:0#manifest"
	APISchema       = "urn:xmpp:agent-api:0#schema"
	APISelfRegister = "urn:xmpp:agent-api:0#self-register"
	APIAdmin        = "urn:xmpp:agent-api:0#admin"
	ToolsNodePrefix = "urn:xmpp:agent-tools:0" // + "#" + version
	Tool            = "urn:xmpp:agent-tool:0"  // feature, and node prefix
	Endpoint        = "urn:xmpp:agent-endpoint:0"
	EndpointInfo    = "urn:xmpp:agent-endpoint-info:0"
	ToolInfo        = "urn:xmpp:agent-tool-info:0"
	Task            = "urn:xmpp:agent-task:0"
	TaskProgress    = "urn:xmpp:agent-task:0#progress"
	TaskCancel      = "urn:xmpp:agent-task:0#cancel"
	TaskInput       = "urn:xmpp:agent-task:0#input"
)

// agentgw's own extension: the delegation depth of an invocation (see
// docs/design-notes.md, "Delegation depth"). Delegation is the invoke child
// element's namespace and the disco feature of endpoints that accept it;
// MetaDelegationDepth is the MCP _meta key that carries the depth from the
// gateway to an MCP server and on to an `agentgw mcp` front.
const (
	Delegation = "urn:agentgw:delegation:0"
	// Principal is the trusted-front principal assertion
	// (<on-behalf-of jid='…'/> inside an IQ's payload; docs/oauth.md).
	Principal           = "urn:agentgw:principal:0"
	MetaDelegationDepth = "agentgw/delegationDepth"
)

// TaskList is agentgw's extension that lists a requester's own tasks (an
// IQ get to the gateway domain; docs/task-list.md). The protocol has no
// task listing.
const TaskList = "urn:agentgw:task-list:0"

// XEPs.
const (
	DiscoInfo  = "http://jabber.org/protocol/disco#info"  // XEP-0030
	DiscoItems = "http://jabber.org/protocol/disco#items" // XEP-0030
	RSM        = "http://jabber.org/protocol/rsm"         // XEP-0059
	Data       = "jabber:x:data"                          // XEP-0004
	Search     = "jabber:iq:search"                       // XEP-0055
	VCard      = "vcard-temp"                             // XEP-0054
	Ping       = "urn:xmpp:ping"                          // XEP-0199
	Hashes     = "urn:xmpp:hashes:2"                      // XEP-0300
	Version    = "jabber:iq:version"                      // XEP-0092
)

// Identity category and types.
const (
	CategoryAutomation = "automation"
	TypeGateway        = "agent-gateway"
	TypeDirectory      = "agent-directory"
	TypeEndpoint       = "agent-endpoint"
	TypeToolCollection = "agent-tool-collection"
	TypeTool           = "agent-tool"
)

// Media types.
const (
	MediaJSON       = "application/json"
	MediaSchemaJSON = "application/schema+json"
	HashAlgo        = "sha-256"
)

// RFC 6120.
const (
	Stanzas = "urn:ietf:params:xml:ns:xmpp-stanzas" // stanza error conditions
)

// XEPs of the ad-hoc command surface and of catalog change notification
// (docs/adhoc.md).
const (
	Commands    = "http://jabber.org/protocol/commands"       // XEP-0050
	Caps        = "http://jabber.org/protocol/caps"           // XEP-0115
	PubSub      = "http://jabber.org/protocol/pubsub"         // XEP-0060
	PubSubEvent = "http://jabber.org/protocol/pubsub#event"   // XEP-0060
	PubSubError = "http://jabber.org/protocol/pubsub#errors"  // XEP-0060
	TypeCommand = "command-node"                              // XEP-0050 identity type
	XDataValid  = "http://jabber.org/protocol/xdata-validate" // XEP-0122
)

// agentgw's own extension: the catalog change PubSub node at the gateway
// and the payload of its items (docs/adhoc.md, "Catalog changes"). The
// spec leaves change notification to a future version; this is not part of
// it.
const (
	Catalog     = "urn:agentgw:catalog:0"
	CatalogNode = "urn:agentgw:catalog:0"
)
