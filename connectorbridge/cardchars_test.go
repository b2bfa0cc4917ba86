package connectorbridge

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/directory"
)

// TestCardControlCharacterIsPublishable: a Connector Card whose texts hold
// a control character (carried by the manifest's JSON text as an escape)
// projects to a manifest the directory registers, with the character
// intact. Before, the directory refused it and the endpoint could never be
// published.
func TestCardControlCharacterIsPublishable(t *testing.T) {
	t.Parallel()
	card := bytes.Replace(connectortest.DefaultCard,
		[]byte(`"description": "Reference xAgent Connector Server`), []byte(`"description": "Reference\u001f xAgent Connector Server`), 1)
	card = bytes.Replace(card, []byte(`"description": "Returns the text it was given."`), []byte(`"description": "Returns\u0001 the text it was given."`), 1)
	if bytes.Equal(card, connectortest.DefaultCard) {
		t.Fatal("the card fixture changed; nothing was replaced")
	}
	e := newEnv(t, func(so *connectortest.Options, _ *Options) { so.Card = card })
	e.start(nil)
	e.authForm()
	e.waitTools(4)
	m, err := directory.ParseManifest(e.pub.last())
	if err != nil {
		t.Fatalf("the directory refuses the projected manifest: %v", err)
	}
	if !strings.Contains(m.Agent.Description, "Reference\u001f xAgent") {
		t.Errorf("agent description %q", m.Agent.Description)
	}
	echo, ok := m.Tool("echo")
	if !ok || echo.Description != "Returns\u0001 the text it was given." {
		t.Errorf("echo tool %+v", echo)
	}
}
