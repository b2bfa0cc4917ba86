package lease

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/pgharness"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// leaseEnv is one cluster: a PostgreSQL database, ejabberd with the
// operator's cluster listener, and the members' configs (member i is
// gw-i, the same config but its [cluster] instance).
type leaseEnv struct {
	t       *testing.T
	e       *e2e.Env
	dsn     string
	members map[string]*e2e.Proc
}

// newLeaseEnv prepares a cluster whose config ends with extra (agents
// and sections), users registered on ejabberd.
func newLeaseEnv(t *testing.T, users []string, extra func(domain, serverDomain string) string) *leaseEnv {
	t.Helper()
	pg := pgharness.Shared(t)
	dsn := pg.NewDatabase(t)
	srv := xmppharness.SharedEjabberd(t, xmppharness.EjabberdOptions{Snippet: "deploy/cluster/ejabberd-listener.yml"})
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: users, PostgresDSN: dsn, Instance: "gw-1",
		TOML: "[cluster]\nlease_seconds = 2\n" + extra(srv.ComponentDomain, srv.Domain)})
	// [cluster] instance is written by Prepare; lease_seconds joins it.
	cfg, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(cfg), "[cluster]\nlease_seconds = 2\n", "", 1)
	s = strings.Replace(s, "instance = \"gw-1\"", "instance = \"gw-1\"\nlease_seconds = 2", 1)
	if err := os.WriteFile(e.ConfigPath, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &leaseEnv{t: t, e: e, dsn: dsn, members: map[string]*e2e.Proc{}}
	t.Cleanup(func() {
		if t.Failed() {
			l.dumpTables("SELECT direction, message_id, state, attempts, seq, expires_at, created_at FROM connector_chat_queue")
			for n, p := range l.members {
				t.Logf("member %s log:\n%s", n, e2e.Tail(p.Log(), 6000))
			}
		}
	})
	return l
}

// config is member name's config file.
func (l *leaseEnv) config(name string) string {
	if name == "gw-1" {
		return l.e.ConfigPath
	}
	p := filepath.Join(l.e.Dir, name+".toml")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	cfg, err := os.ReadFile(l.e.ConfigPath)
	if err != nil {
		l.t.Fatal(err)
	}
	s := strings.Replace(string(cfg), `instance = "gw-1"`, `instance = "`+name+`"`, 1)
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		l.t.Fatal(err)
	}
	return p
}

// serve starts member name.
func (l *leaseEnv) serve(name string) *e2e.Proc {
	p := l.e.ServeConfig(name, l.config(name))
	l.members[name] = p
	return p
}

// holder waits until one live member logged that it acquired lease and
// returns it (the last to log it among the live ones).
func (l *leaseEnv) holder(lease string, timeout time.Duration) string {
	l.t.Helper()
	var h string
	testkit.WaitFor(l.t, timeout, "a member holding lease "+lease, func() bool {
		h = ""
		for n, p := range l.members {
			if !alive(p) {
				continue
			}
			if acquiredLast(p.Log(), lease) {
				h = n
			}
		}
		return h != ""
	})
	return h
}

// acquiredLast reports whether log's last line about lease is its
// acquisition.
func acquiredLast(log, lease string) bool {
	acq, lost := -1, -1
	for i, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `lease=`+lease) && !strings.Contains(line, `lease="`+lease+`"`) {
			continue
		}
		switch {
		case strings.Contains(line, "lease acquired"):
			acq = i
		case strings.Contains(line, "lease lost"):
			lost = i
		}
	}
	return acq > lost
}

// inbox is a logged-in XMPP user collecting the chat messages it gets.
type inbox struct {
	mu   sync.Mutex
	msgs []*xmltree.Element
	conn *xmppclient.Client
}

func (l *leaseEnv) inbox(user string) *inbox {
	_, conn := l.e.DialConn(user)
	in := &inbox{conn: conn}
	conn.OnMessage(func(m *xmltree.Element) {
		in.mu.Lock()
		in.msgs = append(in.msgs, m)
		in.mu.Unlock()
	})
	return in
}

// bodies lists the bodies of the chat messages received from from (a
// bare JID prefix).
func (in *inbox) bodies(from string) []string {
	var out []string
	for _, m := range in.messages(from) {
		out = append(out, m.body)
	}
	return out
}

// received is one chat message as the receiver sees it: its origin-id
// (else its stanza id) and its body.
type received struct{ id, body string }

// messages lists the chat messages received from from (a bare JID prefix)
// with the id a receiver de-duplicates by (XEP-0359 origin-id, else the
// stanza id).
func (in *inbox) messages(from string) []received {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []received
	for _, m := range in.msgs {
		if !strings.HasPrefix(m.AttrValue("from"), from) || m.AttrValue("type") == "error" {
			continue
		}
		b := m.Child("", "body")
		if b == nil {
			continue
		}
		id := m.AttrValue("id")
		if o := m.Child("urn:xmpp:sid:0", "origin-id"); o != nil && o.AttrValue("id") != "" {
			id = o.AttrValue("id")
		}
		out = append(out, received{id: id, body: b.Text})
	}
	return out
}

func alive(p *e2e.Proc) bool {
	select {
	case <-p.Exited():
		return false
	default:
		return true
	}
}

// sendChat sends a chat message from the inbox to to.
func sendChat(t *testing.T, in *inbox, to, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := xmltree.New("jabber:client", "message", "type", "chat", "to", to, "id", fmt.Sprintf("m-%d", time.Now().UnixNano()))
	m.Add(xmltree.New("jabber:client", "body").WithText(body))
	if err := in.conn.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// dumpTables logs the rows of queries (diagnostics of a failed test).
func (l *leaseEnv) dumpTables(tables ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, l.dsn)
	if err != nil {
		l.t.Logf("dump: %v", err)
		return
	}
	defer conn.Close(ctx)
	for _, tb := range tables {
		rows, err := conn.Query(ctx, tb)
		if err != nil {
			l.t.Logf("dump %s: %v", tb, err)
			continue
		}
		for rows.Next() {
			v, _ := rows.Values()
			l.t.Logf("%s: %v", tb, v)
		}
		rows.Close()
	}
}
