package connectorbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/connectorbridge/transport"
	"github.com/agentgw/agentgw/connectorbridge/wire"
	"github.com/agentgw/agentgw/store/sqlite"
)

func TestReferenceCardIsValidAndMatchesTestdata(t *testing.T) {
	t.Parallel()
	if _, err := wire.ParseCard(connectortest.DefaultCard); err != nil {
		t.Fatalf("reference card: %v", err)
	}
	for _, f := range []struct {
		file     string
		embedded []byte
	}{
		{"../testdata/connector/card.json", connectortest.DefaultCard},
		{"../testdata/connector/skill.md", connectortest.DefaultSkill},
	} {
		b, err := os.ReadFile(f.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, f.embedded) {
			t.Errorf("%s differs from the copy embedded in connectortest; keep them identical", f.file)
		}
	}
	if transport.SkillName(string(connectortest.DefaultSkill)) != "connector-im-refconnector" {
		t.Errorf("skill header name not parsed")
	}
}

func TestStripAndInjectChannel(t *testing.T) {
	t.Parallel()
	card, _ := wire.ParseCard(connectortest.DefaultCard)
	tl, _ := card.Tool("echo")
	s, err := stripChannelArg(tl.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(s), "connector_channel_id") || !strings.Contains(string(s), `"required":["text"]`) {
		t.Errorf("stripped schema: %s", s)
	}
	tl, _ = card.Tool("always_fail")
	s, _ = stripChannelArg(tl.InputSchema)
	if strings.Contains(string(s), "required") {
		t.Errorf("empty required kept: %s", s)
	}
	a, err := injectChannel(json.RawMessage(`{"text":"<hi>","connector_channel_id":"spoofed"}`), "cch_real")
	if err != nil || string(a) != `{"connector_channel_id":"cch_real","text":"<hi>"}` {
		t.Errorf("inject: %s %v", a, err)
	}
	a, _ = injectChannel(nil, "c")
	if string(a) != `{"connector_channel_id":"c"}` {
		t.Errorf("inject into nothing: %s", a)
	}
}

func TestProjectionVersioning(t *testing.T) {
	t.Parallel()
	card, _ := wire.ParseCard(connectortest.DefaultCard)
	o := &Options{Endpoint: "im@agents.example.test"}
	d1, _, _ := wire.ParseDescriptor(connectortest.DescriptorJSON(nil), card, "cch_1")
	p1, err := project(o, card, transport.Skill{Text: "guide", Name: "connector-im-refconnector"}, d1)
	if err != nil {
		t.Fatal(err)
	}
	if err := validateManifest(p1.manifest); err != nil {
		t.Fatal(err)
	}
	p1b, _ := project(o, card, transport.Skill{Text: "guide", Name: "connector-im-refconnector"}, d1)
	if p1.version != p1b.version || !bytes.Equal(p1.manifest, p1b.manifest) {
		t.Error("projection is not deterministic")
	}
	if !strings.HasPrefix(p1.version, "1.0.0-") {
		t.Errorf("version %s does not start with connector.version", p1.version)
	}
	if strings.Join(p1.tools, ",") != "echo,leak_key" {
		t.Errorf("tools %v", p1.tools)
	}
	d2, _, _ := wire.ParseDescriptor(connectortest.DescriptorJSON(func(m map[string]any) { m["tools"] = m["tools"].([]any)[:1] }), card, "cch_1")
	p2, _ := project(o, card, transport.Skill{Text: "guide"}, d2)
	if p2.version == p1.version || strings.Join(p2.tools, ",") != "echo" {
		t.Errorf("availability change: %s vs %s, tools %v", p2.version, p1.version, p2.tools)
	}
	p3, _ := project(o, card, transport.Skill{Text: "other guide"}, d1)
	if p3.version == p1.version {
		t.Error("skill change keeps the version")
	}
	card.Build.GitRev = "another"
	p4, _ := project(o, card, transport.Skill{Text: "guide", Name: "connector-im-refconnector"}, d1)
	if p4.version == p1.version {
		t.Error("build change keeps the version")
	}
	// Long Skill text is cut to the description limit; odd versions are
	// mapped onto the grammar.
	card.Connector.Version = "1.0 beta/2+ü"
	p5, _ := project(o, card, transport.Skill{Text: strings.Repeat("é", 9000)}, d1)
	if err := validateManifest(p5.manifest); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p5.version, "1.0-beta-2--") {
		t.Errorf("version %s", p5.version)
	}
	// No descriptor: a manifest with no tools.
	p6, _ := project(o, card, transport.Skill{}, nil)
	if len(p6.tools) != 0 {
		t.Error("tools without a descriptor")
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	r := backendkit.NewRedactor(nil)
	r.Add("sk-secret")
	r.Add("ab") // too short to scrub safely
	out, changed, err := r.ScrubJSON(json.RawMessage(`{"a":"Bearer sk-secret","b":["s\u006b-secret"],"sk-secret":1,"n":12345678901234567890}`))
	if err != nil || !changed {
		t.Fatal(err, changed)
	}
	if strings.Contains(string(out), "sk-secret") || !strings.Contains(string(out), "12345678901234567890") {
		t.Errorf("scrubbed: %s", out)
	}
	if got := displayText(r, "x\x1b[31m sk-secret\u202e", 100); strings.Contains(got, "sk-secret") || strings.ContainsRune(got, 0x1b) || strings.ContainsRune(got, '\u202e') {
		t.Errorf("display: %q", got)
	}
}

func TestBindingSchemaInvariants(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(context.Background(), t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Write.Exec(`INSERT INTO connector_bindings (endpoint, connector_card_id, auth_state) VALUES ('a@b.c', 'im.x', 'authenticated')`); err == nil {
		t.Error("an authenticated binding without a channel was accepted")
	}
	if _, err := db.Write.Exec(`INSERT INTO connector_bindings (endpoint, connector_card_id, auth_state) VALUES ('a@b.c', 'im.x', 'maybe')`); err == nil {
		t.Error("an unknown auth_state was accepted")
	}
	st := &bindingStore{d: sqlite.NewBindings(db), endpoint: "a@b.c"}
	ctx := context.Background()
	g1, err := st.setChannel(ctx, "im.x", "cch_1", true)
	if err != nil || g1 != 1 {
		t.Fatalf("setChannel: %d %v", g1, err)
	}
	if g, _ := st.setChannel(ctx, "im.x", "cch_1", true); g != 1 {
		t.Errorf("an unchanged binding bumped the generation to %d", g)
	}
	if g, _ := st.setChannel(ctx, "im.x", "cch_1", false); g != 2 {
		t.Errorf("auth change: generation %d", g)
	}
	st.setConnectorID(ctx, "im.x", "conn_1")
	b, err := st.load(ctx, "im.x")
	if err != nil || b.ChannelID != "cch_1" || b.Authenticated || b.ConnectorID != "conn_1" || b.Generation != 2 {
		t.Errorf("load = %+v %v", b, err)
	}
}
