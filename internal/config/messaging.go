package config

import "fmt"

// Messaging bounds the Human Messaging profile (docs/messaging.md). Zero
// takes the default.
type Messaging struct {
	// MaxBodyBytes bounds one chat body, inbound and outbound.
	MaxBodyBytes int `toml:"max_body_bytes"`
	// MaxFiles bounds the files shared with one message.
	MaxFiles int `toml:"max_files"`
	// PerConversationPerSecond and PerConversationBurst are the token
	// bucket of what one peer sends one endpoint (the endpoint may send
	// the peer ten times as much).
	PerConversationPerSecond float64 `toml:"per_conversation_per_second"`
	PerConversationBurst     int     `toml:"per_conversation_burst"`
	// MaxQueued bounds the turns accepted but not yet taken by backends.
	MaxQueued int `toml:"max_queued"`
}

// maxChatBody keeps a chat body well inside the stanza size limit.
const maxChatBody = 256 << 10

func (m *Messaging) applyDefaults() {
	if m.MaxBodyBytes == 0 {
		m.MaxBodyBytes = 16 << 10
	}
	if m.MaxFiles == 0 {
		m.MaxFiles = 8
	}
	if m.PerConversationPerSecond == 0 {
		m.PerConversationPerSecond = 2
	}
	if m.PerConversationBurst == 0 {
		m.PerConversationBurst = 10
	}
	if m.MaxQueued == 0 {
		m.MaxQueued = 256
	}
}

func (m *Messaging) validate() []error {
	var errs []error
	if m.MaxBodyBytes < 1 || m.MaxBodyBytes > maxChatBody {
		errs = append(errs, fmt.Errorf("[messaging] max_body_bytes must be from 1 to %d", maxChatBody))
	}
	if m.MaxFiles < 1 || m.MaxFiles > 64 {
		errs = append(errs, fmt.Errorf("[messaging] max_files must be from 1 to 64"))
	}
	if m.PerConversationPerSecond <= 0 || m.PerConversationPerSecond > 10000 {
		errs = append(errs, fmt.Errorf("[messaging] per_conversation_per_second must be above 0 and at most 10000"))
	}
	if m.PerConversationBurst < 1 || m.PerConversationBurst > 100000 {
		errs = append(errs, fmt.Errorf("[messaging] per_conversation_burst must be from 1 to 100000"))
	}
	if m.MaxQueued < 1 || m.MaxQueued > 1000000 {
		errs = append(errs, fmt.Errorf("[messaging] max_queued must be from 1 to 1000000"))
	}
	return errs
}
