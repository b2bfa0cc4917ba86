// Package archtest checks the layering of the module: the folders show the
// flow of a call only while no lower tier imports a higher one, and the
// production binary links no test helper.
package archtest

import (
	"os/exec"
	"path"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/agentgw/agentgw/"

// tiers places every production package. A package may import packages of
// a strictly lower tier only; the leaf helpers (tier 0) may also import
// each other. A new package must be placed here, so the table stays the
// map of the code (docs/design-notes.md, "Layout").
var tiers = map[string]int{
	// Leaf helpers and the vocabulary both ends share.
	"agentproto": 0, "agentproto/ns": 0,
	"internal/backoff": 0, "internal/clock": 0, "internal/config": 0,
	"internal/ids": 0, "internal/ijson": 0, "internal/logging": 0, "internal/metrics": 0, "internal/oauthrs": 0,
	"internal/procsec": 0, "internal/schema": 0, "store/migrate": 0,
	"internal/httpauth":  0,
	"internal/telemetry": 0, "internal/displaytext": 0,
	// One package per XEP codec (forms, RSM, time, the XML tree).
	"xep/xmltree": 0, "xep/dataform": 0, "xep/rsm": 0, "xep/xmpptime": 0,
	// The XMPP session, the bridges' kit, driver interfaces and policy.
	"component": 1, "backendkit": 1, "callers/agentclient/xmppclient": 1, "federation": 1,
	"directory/dirdb": 1, "tasks/taskdb": 1, "connectorbridge/bindingdb": 1, "cluster": 1,
	"a2abridge/a2amap":  1,
	"a2abridge/cardsig": 1, "callers/a2afront/frontdb": 1,
	"accbridge/accdb": 1, "accbridge": 4,
	"connectorbridge/chatdb": 1, "internal/transfer": 1,
	// The directory, the set of store interfaces, the caller SDK.
	"directory": 2, "store": 2, "callers/agentclient": 2, "connectorbridge/wire": 2,
	// The two store drivers (one per database, a file per feature) over
	// the interfaces beside each feature.
	"store/sqlite": 3, "store/pg": 3,
	// The task engine (it pins manifests from the directory), the
	// connector's transports (on its wire types).
	"tasks": 3, "connectorbridge/transport": 3,
	// Wire adapters and backends.
	"directory/dirxmpp": 4, "tasks/taskxmpp": 4, "mcpbridge": 4,
	// The MCP bridge's OAuth client ([agents.mcp.oauth], issue 32).
	"mcpbridge/mcpoauth": 1,
	"connectorbridge":    4,
	// Ad-hoc commands over the task engine; catalog change notification.
	"adhoc": 4, "adhoc/admincmd": 4, "catalogpush": 4,
	// A2A both ways.
	"a2abridge": 4,
	// The XMPP callers: the MCP front (`agentgw mcp`) and the A2A front
	// (`agentgw a2a`) on the caller SDK and their one shared catalog.
	"callers/catalog": 3, "callers/mcpfront": 4, "callers/a2afront": 4,
	"messaging": 4,
	// The composition root, then the programs.
	// The OpenAgentNetwork bridge (lane 18).
	"oanbridge/oandb": 1, "oanbridge/wire": 2, "oanbridge/sio": 2, "oanbridge": 4,
	"gateway":     5,
	"cmd/agentgw": 6, "tools/demo": 6, "tools/benchreport": 6,
	// Self Registration (lane 21): its store interface, and the C2S
	// endpoint host beside the gateway.
	"directory/selfregdb": 1, "directory/presencedb": 1, "endpointhost": 5,
	// The operator web console (issue 33 §1) beside the gateway: it is
	// handed the gateway's parts by `agentgw serve`.
	"console": 5,
	// Its logins' store interface, shared by a cluster's members.
	"console/sessiondb": 1,
}

// forbidden are the DESIGN.md "must not import" rules that tiers alone do
// not express.
var forbidden = map[string][]string{
	"component":       {"database/sql"},
	"directory":       {"database/sql", module + "store"},
	"tasks":           {"database/sql", "mellium.im/xmpp", module + "store"},
	"federation":      {"database/sql", module + "store"},
	"connectorbridge": {module + "component", module + "mcpbridge", "database/sql", module + "store"},
	"mcpbridge":       {module + "component", module + "connectorbridge"},
	"oanbridge":       {module + "component", module + "mcpbridge", module + "connectorbridge", "database/sql", module + "store"},
	"accbridge":       {module + "component", module + "mcpbridge", module + "connectorbridge", "database/sql", module + "store"},
}

// sqlDrivers are the only production packages that may speak SQL: every
// query lives in the store drivers (docs/storage.md).
var sqlDrivers = map[string]bool{"store/sqlite": true, "store/pg": true}

// sqlImports are the packages that speak SQL.
var sqlImports = []string{"database/sql", "github.com/jackc/pgx", "github.com/mattn/go-sqlite3"}

// testHelper reports whether p exists only for tests (suites, fakes,
// harnesses, reference peers).
func testHelper(p string) bool {
	base := path.Base(p)
	return strings.HasSuffix(base, "test") || p == "testkit" || strings.HasPrefix(p, "testkit/") ||
		strings.HasPrefix(p, "e2e/") || p == "scripts" ||
		strings.HasPrefix(p, "connectorbridge/connectortest") || strings.HasPrefix(p, "accbridge/acctest")
}

func list(t *testing.T, args ...string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkgs[strings.TrimPrefix(f[0], module)] = f[1:]
	}
	return pkgs
}

func TestTiers(t *testing.T) {
	pkgs := list(t, module+"...")
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if testHelper(p) {
			continue
		}
		tier, ok := tiers[p]
		if !ok {
			t.Errorf("%s is not placed in a tier: add it to tiers (then `make layout` rewrites the table in docs/design-notes.md)", p)
			continue
		}
		for _, imp := range pkgs[p] {
			for _, bad := range forbidden[p] {
				if imp == bad || strings.HasPrefix(imp, bad+"/") {
					t.Errorf("%s imports %s, which DESIGN.md forbids", p, imp)
				}
			}
			for _, sqlPkg := range sqlImports {
				if (imp == sqlPkg || strings.HasPrefix(imp, sqlPkg+"/")) && !sqlDrivers[p] {
					t.Errorf("%s imports %s: SQL belongs in the store drivers (store/sqlite, store/pg)", p, imp)
				}
			}
			if !strings.HasPrefix(imp, module) {
				continue
			}
			q := strings.TrimPrefix(imp, module)
			if testHelper(q) && !strings.HasPrefix(p, "tools/") { // tools drive test peers
				t.Errorf("%s (production) imports the test helper %s", p, q)
				continue
			}
			qt, ok := tiers[q]
			if !ok {
				continue // reported on its own
			}
			if qt > tier || (qt == tier && tier != 0) {
				t.Errorf("%s (tier %d) imports %s (tier %d): a lower or equal tier imports upward", p, tier, q, qt)
			}
		}
	}
}

// TestBinaryLinksNoTestHelper: every package cmd/agentgw links, directly or
// not, is production code.
func TestBinaryLinksNoTestHelper(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"cmd/agentgw").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	n := 0
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, module) {
			continue
		}
		n++
		if q := strings.TrimPrefix(p, module); testHelper(q) {
			t.Errorf("agentgw links the test helper %s", q)
		}
	}
	if n < 20 {
		t.Fatalf("go list -deps found only %d project packages in agentgw: the check did not run on the binary", n)
	}
}
