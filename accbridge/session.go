package accbridge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/agentgw/agentgw/accbridge/accdb"
)

// Health of a connector session, driven by heartbeats (acc-notes:
// 3 missed → degraded, 10 missed → offline).
type health int32

const (
	healthOnline health = iota
	healthDegraded
)

// session is one authenticated connector connection.
type session struct {
	s      *Server
	conn   accdb.Connector
	ws     *websocket.Conn
	remote string

	ctx    context.Context
	cancel context.CancelFunc

	registered atomic.Bool
	lastBeat   atomic.Int64 // unix nanos of the last heartbeat (or register)
	state      atomic.Int32
	closeOnce  sync.Once
	writeMu    sync.Mutex
}

func newSession(s *Server, c accdb.Connector, ws *websocket.Conn, remote string) *session {
	return &session{s: s, conn: c, ws: ws, remote: remote}
}

// send writes one message, bounded in time.
func (x *session) send(v any) error {
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	ctx, cancel := context.WithTimeout(x.ctx, 10*time.Second)
	defer cancel()
	return x.ws.Write(ctx, websocket.MessageText, marshal(v))
}

func (x *session) sendError(code int, msg, runID string) {
	x.send(errFrame{Type: TypeError, Code: code, Message: msg, RunID: runID})
}

func (x *session) close(code websocket.StatusCode, reason string) {
	x.closeOnce.Do(func() {
		// The close handshake first, so the peer learns why; then the
		// session's context (a Read ended by its context would drop the
		// socket without a close frame).
		go func() {
			x.ws.Close(code, reason)
			if x.cancel != nil {
				x.cancel()
			}
		}()
	})
}

func (x *session) alive() bool { return x.ctx.Err() == nil }

// run serves the connection: register first (within the seed's 10 s),
// then messages until the socket closes.
func (x *session) run(parent context.Context) {
	x.ctx, x.cancel = context.WithCancel(parent)
	defer x.cancel()
	log := x.s.log.With("connector", x.conn.Name)
	defer func() {
		x.ws.CloseNow()
		if x.registered.Load() {
			x.s.detach(x)
			log.Info("acc connector disconnected", "remote", x.remote)
		}
	}()
	// register must come first and in time. (A Read whose context ends
	// closes the socket at once, so the timeout is a timer that can still
	// say why.)
	var first atomic.Bool
	timer := time.AfterFunc(x.s.o.RegisterTimeout, func() {
		if first.CompareAndSwap(false, true) {
			log.Warn("acc connector sent no register in time; closing", "timeout", x.s.o.RegisterTimeout)
			x.sendError(ErrInvalidRequest, "register timeout", "")
			x.ws.Close(websocket.StatusPolicyViolation, "register timeout")
		}
	})
	typ, data, err := x.ws.Read(x.ctx)
	timer.Stop()
	if !first.CompareAndSwap(false, true) || err != nil {
		return
	}
	f, ferr := x.decode(typ, data)
	if ferr != nil || f.Type != TypeRegister {
		log.Warn("acc connector sent something before register; closing")
		x.sendError(ErrInvalidRequest, "register first", "")
		x.ws.Close(websocket.StatusPolicyViolation, "register first")
		return
	}
	if f.ConnectorID != x.conn.ID {
		log.Warn("acc connector registered with another connector_id than its token; closing")
		x.sendError(ErrUnauthorized, "connector_id does not match the credentials", "")
		x.ws.Close(websocket.StatusPolicyViolation, "unauthorized")
		return
	}
	x.lastBeat.Store(time.Now().UnixNano())
	if err := x.send(map[string]any{
		"type": TypeRegisterAck, "connector_id": x.conn.ID, "server_time": time.Now().UTC().Format(time.RFC3339),
		"config": map[string]any{
			"heartbeat_seconds": x.s.o.Heartbeat.Seconds(),
			"max_frame_bytes":   x.s.o.MaxFrameBytes,
		},
	}); err != nil {
		return
	}
	x.registered.Store(true)
	log.Info("acc connector registered", "remote", x.remote, "version", clip(f.Version, 64), "host", clip(f.Host, 128))
	x.s.attach(x)
	go x.s.reconcile(x.ctx, x)
	go x.watchHeartbeats(log)
	for {
		typ, data, err := x.ws.Read(x.ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) && ce.Code == websocket.StatusMessageTooBig {
				log.Warn("acc connector sent an oversized frame; closed", "limit", x.s.o.MaxFrameBytes)
			}
			return
		}
		f, err := x.decode(typ, data)
		if err != nil {
			x.sendError(ErrInvalidRequest, err.Error(), "")
			continue
		}
		x.handle(f)
	}
}

func (x *session) decode(typ websocket.MessageType, data []byte) (*frame, error) {
	if typ != websocket.MessageText {
		return nil, errors.New("binary frames are not part of the protocol")
	}
	return decodeFrame(data, x.s.o.MaxFrameBytes)
}

// watchHeartbeats degrades the connector's agents after 3 missed
// heartbeats and closes the connection after 10.
func (x *session) watchHeartbeats(log interface{ Warn(string, ...any) }) {
	period := x.s.o.Heartbeat
	t := time.NewTicker(period / 2)
	defer t.Stop()
	for {
		select {
		case <-x.ctx.Done():
			return
		case <-t.C:
		}
		missed := int(time.Since(time.Unix(0, x.lastBeat.Load())) / period)
		switch {
		case missed >= 10:
			log.Warn("acc connector missed 10 heartbeats; closing its connection")
			x.close(websocket.StatusPolicyViolation, "heartbeat timeout")
			return
		case missed >= 3:
			if x.state.Swap(int32(healthDegraded)) != int32(healthDegraded) {
				log.Warn("acc connector missed 3 heartbeats; its agents are degraded")
				x.s.setDegraded(x.conn.Name, true)
			}
		}
	}
}

func (x *session) handle(f *frame) {
	switch f.Type {
	case TypeHeartbeat:
		x.lastBeat.Store(time.Now().UnixNano())
		if x.state.Swap(int32(healthOnline)) == int32(healthDegraded) {
			x.s.log.Info("acc connector heartbeats again; no longer degraded", "connector", x.conn.Name)
			x.s.setDegraded(x.conn.Name, false)
		}
		x.send(map[string]string{"type": TypeHeartbeatAck})
	case TypeCapabilities:
		if err := validAgents(f.Agents, x.s.o.MaxAgents); err != nil {
			x.s.log.Warn("acc connector capabilities refused", "connector", x.conn.Name, "reason", err.Error(), "agents", len(f.Agents))
			x.sendError(ErrInvalidRequest, err.Error(), "")
			return
		}
		x.s.capabilities(x, f.Agents)
	case TypeRunAccepted, TypeRunEvent, TypeRunCancelled, TypeApprovalRequest, TypeHandoff:
		if f.RunID == "" && f.FromRunID != "" {
			f.RunID = f.FromRunID
		}
		if !x.s.route(x, f) {
			if x.s.settled.late(x.conn.ID, f) {
				// The confirmation of a cancel_run for a run already settled.
				x.s.log.Info("acc connector confirmed the cancel of a run already settled", "connector", x.conn.Name, "run", f.RunID)
				return
			}
			x.sendError(ErrRunNotFound, "run not found", f.RunID)
		}
	case TypeError:
		if f.RunID == "" || !x.s.route(x, f) {
			if f.RunID != "" {
				x.s.settled.late(x.conn.ID, f)
			}
			x.s.log.Info("acc connector reported an error", "connector", x.conn.Name, "code", f.Code)
		}
	case TypeUploadArtifact, TypeDownloadArtifact:
		// Artifacts are not carried (docs/acc-bridge.md).
		x.sendError(ErrInvalidRequest, "artifacts are not supported by this control center", f.RunID)
	case TypeApprovalGranted, TypeApprovalDenied, TypeRegister, TypeCreateRun, TypeCancelRun:
		// Server-to-connector messages (a forged approval among them).
		x.s.log.Warn("acc connector sent a server-side message; ignored", "connector", x.conn.Name, "type", clip(f.Type, 32))
		x.sendError(ErrUnknownType, "unknown message type", f.RunID)
	default:
		x.sendError(ErrUnknownType, "unknown message type", f.RunID)
	}
}
