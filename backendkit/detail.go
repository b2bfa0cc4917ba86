package backendkit

// BridgeDetail is one thing a bridge tells operators about itself on the
// console's bridges page: an xAgent channel, an OpenAgentNetwork account,
// an A2A card. Public facts only: never a key, a token, or a URL's query
// (where a token may sit).
type BridgeDetail struct {
	Kind   string // "xagent channel", "oan account", "a2a card"
	Name   string
	State  string
	Detail string
}

// Describer is a backend that tells its BridgeDetails.
type Describer interface {
	BridgeDetails() []BridgeDetail
}
