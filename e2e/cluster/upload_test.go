package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/cluster"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/internal/transfer"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/pgharness"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

const (
	uploadTransfers   = 100
	uploadConcurrency = 10
)

// uploadMember is one cluster member's XMPP side: the gateway's component
// session, with the gateway's cluster wiring (instance-tagged IQ ids,
// answers forwarded over its own PostgreSQL bus), and the XEP-0363 client
// the gateway's connector chat uploads files through.
type uploadMember struct {
	name string
	comp *component.Component
	up   *transfer.HTTPUpload
	log  *e2e.SyncBuffer
}

// TestClusterUploadSlots: 100 file transfers through XEP-0363 upload
// slots, spread over three members of one component domain on ejabberd.
// Every slot request (and the upload service's discovery before it) is an
// IQ whose result ejabberd hands to a random member; every transfer must
// complete, and the bytes must be served back as uploaded.
func TestClusterUploadSlots(t *testing.T) {
	t.Parallel()
	pgs := pgharness.Shared(t)
	// Its own ejabberd: the upload service serves the main domain only.
	srv := xmppharness.StartEjabberd(t, xmppharness.EjabberdOptions{
		Snippet: "deploy/cluster/ejabberd-listener.yml", HTTPUpload: true})
	dsn := pgs.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	t.Cleanup(func() { cancel(); running.Wait() })

	members := startMembers(t, ctx, &running, srv, dsn, nil)

	var done atomic.Int64
	perMember := make([]atomic.Int64, len(members))
	errs := make(chan error, uploadTransfers)
	jobs := make(chan int)
	var workers sync.WaitGroup
	for range uploadConcurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for k := range jobs {
				i := k % len(members)
				if err := transferOne(ctx, members[i], k); err != nil {
					errs <- fmt.Errorf("transfer %d via %s: %w", k, members[i].name, err)
					continue
				}
				perMember[i].Add(1)
				done.Add(1)
			}
		}()
	}
	start := time.Now()
	for k := range uploadTransfers {
		jobs <- k
	}
	close(jobs)
	workers.Wait()
	close(errs)

	var forwarded, relayed, dropped, reconnects uint64
	for i, m := range members {
		st := m.comp.Stats()
		forwarded += st.ForwardedAnswers
		relayed += st.RelayedAnswers
		dropped += st.DroppedAnswers
		reconnects += st.Reconnects
		t.Logf("%s: %d transfers, answers forwarded %d, relayed in %d, dropped %d, reconnects %d",
			m.name, perMember[i].Load(), st.ForwardedAnswers, st.RelayedAnswers, st.DroppedAnswers, st.Reconnects)
	}
	t.Logf("%d of %d transfers completed in %v", done.Load(), uploadTransfers, time.Since(start).Round(time.Millisecond))
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	if done.Load() != uploadTransfers {
		for _, m := range members {
			t.Logf("%s log:\n%s", m.name, e2e.Tail(m.log.String(), 3000))
		}
		t.Fatalf("%d of %d transfers completed", done.Load(), uploadTransfers)
	}
	for i := range members {
		if perMember[i].Load() == 0 {
			t.Errorf("%s made no transfer: the transfers were not spread", members[i].name)
		}
	}
	// ejabberd answers about two in three of a member's IQs to another
	// member: without forwarding most transfers could not have completed.
	if relayed == 0 || forwarded == 0 {
		t.Errorf("no IQ answer crossed members (forwarded %d, relayed %d): the test did not exercise the relay", forwarded, relayed)
	}
	if reconnects != 0 {
		t.Errorf("%d reconnects during the transfers", reconnects)
	}
	// Every member still serves: its keepalive holds.
	testkit.WaitFor(t, 10*time.Second, "every member connected", func() bool {
		for _, m := range members {
			if !m.comp.Connected() {
				return false
			}
		}
		return true
	})
}

// startMembers runs three in-process members of srv's component domain,
// each with its own PostgreSQL bus on dsn; route, when set, registers
// handlers on each member's router.
func startMembers(t *testing.T, ctx context.Context, running *sync.WaitGroup, srv *xmppharness.Server, dsn string, route func(*component.Router)) []*uploadMember {
	t.Helper()
	domain := jid.MustParse(srv.ComponentDomain)
	var members []*uploadMember
	for i := 1; i <= 3; i++ {
		m := &uploadMember{name: fmt.Sprintf("gw-%d", i), log: &e2e.SyncBuffer{}}
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		log := slog.New(slog.NewTextHandler(m.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
		bus, err := pg.OpenCluster(ctx, pool, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bus.Close)
		r := component.NewRouter(domain, nil, log)
		if route != nil {
			route(r)
		}
		m.comp = component.New(component.Config{
			Domain: domain, Addr: srv.ComponentAddr, Secret: srv.ComponentSecret, Logger: log,
			Instance: m.name, Relay: bus, RelayMaxBytes: cluster.MaxPayload, AllowMultiple: true,
			IQTimeout: 10 * time.Second, PingInterval: 5 * time.Second,
		}, r)
		m.up = &transfer.HTTPUpload{IQ: m.comp, Server: srv.Domain}
		running.Add(1)
		go func() {
			defer running.Done()
			if err := m.comp.Run(ctx); err != nil {
				t.Errorf("%s: %v", m.name, err)
			}
		}()
		members = append(members, m)
	}
	for _, m := range members {
		select {
		case <-m.comp.Ready():
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not connect:\n%s", m.name, m.log.String())
		}
	}
	return members
}

// TestClusterLargeIQAnswers: answers beyond PostgreSQL's 8000-byte NOTIFY
// limit are forwarded too (the bus carries them by reference), and an
// answer beyond cluster.MaxPayload fails its waiter at once with
// ErrAnswerTooLarge instead of a timeout. The IQs go from each member to
// the component domain itself, so ejabberd picks a random member to answer
// and another random one to read the answer.
func TestClusterLargeIQAnswers(t *testing.T) {
	t.Parallel()
	pgs := pgharness.Shared(t)
	srv := xmppharness.SharedEjabberd(t, xmppharness.EjabberdOptions{Snippet: "deploy/cluster/ejabberd-listener.yml"})
	dsn := pgs.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	t.Cleanup(func() { cancel(); running.Wait() })
	const space = "urn:agentgw:test:big"
	members := startMembers(t, ctx, &running, srv, dsn, func(r *component.Router) {
		r.HandleGatewayIQ(component.IQGet, space, "big", component.IQHandlerFunc(func(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
			n, _ := strconv.Atoi(iq.Payload.AttrValue("size"))
			return xmltree.New(space, "big").WithText(strings.Repeat("x", min(n, 3<<20))), nil
		}))
	})
	ask := func(m *uploadMember, size int) (int, error) {
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		iq := component.NewIQ("get", "", m.comp.Domain(), m.comp.Domain(), xmltree.New(space, "big").SetAttr("size", strconv.Itoa(size)))
		res, err := m.comp.SendIQ(qctx, iq)
		if err != nil {
			return 0, err
		}
		b := res.Child(space, "big")
		if b == nil {
			return 0, fmt.Errorf("answer without payload")
		}
		return len(b.Text), nil
	}
	// 60 KiB answers: every one arrives whole, wherever ejabberd reads it.
	for k := range 15 {
		m := members[k%len(members)]
		got, err := ask(m, 60<<10)
		if err != nil || got != 60<<10 {
			t.Fatalf("60 KiB answer %d via %s: %d bytes, %v\n%s", k, m.name, got, err, e2e.Tail(m.log.String(), 2000))
		}
	}
	// 1.5 MiB answers: whole when read by the asker, ErrAnswerTooLarge
	// (at once, not after the timeout) when read by another member.
	tooLarge := 0
	for k := range 10 {
		m := members[k%len(members)]
		start := time.Now()
		got, err := ask(m, 3<<19)
		switch {
		case err == nil && got == 3<<19:
		case errors.Is(err, component.ErrAnswerTooLarge) && time.Since(start) < 8*time.Second:
			tooLarge++
		default:
			t.Fatalf("1.5 MiB answer %d via %s: %d bytes, %v after %v", k, m.name, got, err, time.Since(start))
		}
	}
	var forwarded, relayed uint64
	for _, m := range members {
		st := m.comp.Stats()
		forwarded += st.ForwardedAnswers
		relayed += st.RelayedAnswers
	}
	t.Logf("answers forwarded %d, relayed %d; 1.5 MiB answers too large to forward: %d of 10", forwarded, relayed, tooLarge)
	if tooLarge == 0 || relayed == 0 {
		t.Errorf("no answer crossed members (too large %d, relayed %d): the test did not exercise the relay", tooLarge, relayed)
	}
}

// transferOne uploads a random file of 1 to 32 KiB through m's upload slot
// and reads it back from the GET URL.
func transferOne(ctx context.Context, m *uploadMember, k int) error {
	size := 1024 * (1 + k%32)
	data := make([]byte, size)
	_, _ = rand.Read(data)
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	get, err := m.up.Upload(tctx, "files@"+m.comp.Domain().String(), fmt.Sprintf("file-%03d.bin", k), "application/octet-stream", data)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(tctx, http.MethodGet, get, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, int64(size)+1))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) {
		return fmt.Errorf("GET %s: status %d, %d bytes, want the %d uploaded", get, resp.StatusCode, len(got), size)
	}
	return nil
}
