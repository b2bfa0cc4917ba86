package tasks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strconv"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

// InputSubmission is one <provide-input/>.
type InputSubmission struct {
	Caller           string // bare JID of the authenticated sender
	Endpoint         string // bare JID the IQ was addressed to
	TaskID           string
	RequestID        string // the input request ID
	ExpectedRevision int64
	MediaType        string
	Input            []byte // raw JSON text as received
}

// ProvideInput accepts the caller's answer to the pending input request.
// After the caller is authorized for the task and the request is known, an
// identical tuple (caller, target, task, request, expected revision, media
// type, canonical input) returns the original acceptance before any other
// check. Then: a request no longer pending (answered with another tuple,
// expired, superseded), a task no longer waiting for it, or a stale
// expected revision is ErrConflict; a wrong media type or input that is not
// I-JSON or fails the request's schema is ErrNotAcceptable. expiresAt and
// the deadline are compared exactly at the commit boundary; at or after
// expiresAt the task is settled failed agentgw:input-expired and the
// answer gets ErrConflict.
func (e *Engine) ProvideInput(ctx context.Context, in InputSubmission) (string, int64, error) {
	if !e.started.Load() || e.closing.Load() {
		return "", 0, reject(ErrServiceUnavailable, "engine not running")
	}
	if !ids.Valid(in.TaskID) || !ids.Valid(in.RequestID) || in.ExpectedRevision < 0 || in.Caller == "" || in.Endpoint == "" {
		return "", 0, reject(ErrBadRequest, "invalid identifiers")
	}
	canon, value, cerr := ijson.Canonicalize(in.Input, e.argLimits)
	key := inputKey(in, canon)

	var (
		rev    int64
		result error
	)
	err := e.doRetry(func(b *batch) error {
		rev, result = 0, nil
		t, err := b.load(in.TaskID)
		if err != nil {
			return err
		}
		if t == nil || t.Caller != in.Caller || t.Endpoint != in.Endpoint {
			result = reject(ErrNotFound, "task")
			return nil
		}
		req, err := b.tx.Input(in.TaskID, in.RequestID)
		if err != nil {
			return err
		}
		if req == nil {
			result = reject(ErrNotFound, "input request")
			return nil
		}
		if cerr != nil {
			if ijson.IsLimit(cerr) {
				result = reject(ErrResourceConstraint, "input exceeds a JSON limit")
			} else {
				result = reject(ErrNotAcceptable, "input is not I-JSON")
			}
			return nil
		}
		if req.AcceptKey != nil && bytes.Equal(req.AcceptKey, key) {
			rev = req.AcceptRev // identical replay: nothing is applied again
			return nil
		}
		if req.Status != taskdb.InputPending || t.State.Terminal() ||
			t.State != agentproto.StateInputRequired || t.InputRequest != in.RequestID {
			result = reject(ErrConflict, "input request is no longer pending")
			return nil
		}
		if in.ExpectedRevision != t.Revision {
			result = reject(ErrConflict, "stale expected revision")
			return nil
		}
		if in.MediaType != ns.MediaJSON {
			result = reject(ErrNotAcceptable, "input media type")
			return nil
		}
		s, err := e.inputSchema(req)
		if err != nil {
			result = reject(ErrNotAcceptable, "input request schema unusable")
			return nil
		}
		if err := s.Validate(value); err != nil {
			if validationTimedOut(err) {
				result = reject(ErrResourceConstraint, "input validation exceeded its time limit")
				return nil
			}
			result = reject(ErrNotAcceptable, "input does not match the schema")
			return nil
		}
		// Time checks last, right before the writes of this commit.
		if done, err := b.expireIfDue(t); done || err != nil {
			result = reject(ErrConflict, "task deadline passed")
			return err
		}
		if expired, err := b.expireInputIfDue(t, req); expired || err != nil {
			result = reject(ErrConflict, "input request expired")
			return err
		}
		payload, err := statusPayload(e.lifecycle, agentproto.StateRunning, b.now())
		if err != nil {
			return err
		}
		if err := b.commit(t, fromInput, agentproto.EventStatus, payload, func(n *taskdb.Task) {
			n.State = agentproto.StateRunning
			n.InputRequest = ""
		}); err != nil {
			return err
		}
		ok, err := b.tx.SetInputStatus(t.ID, in.RequestID, taskdb.InputAnswered, key, t.Revision)
		if err != nil {
			return err
		}
		if !ok {
			return errGuard
		}
		rev = t.Revision
		answer := append([]byte(nil), canon...)
		if !e.owns(t) {
			return b.queueSignal(signal{Kind: sigInput, Task: in.TaskID, Owner: t.Owner, Input: in.RequestID, Answer: answer})
		}
		b.onCommit(func() { e.deliverInput(in.TaskID, in.RequestID, answer, nil) })
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	if result != nil {
		return "", 0, result
	}
	return in.TaskID, rev, nil
}

func (e *Engine) inputSchema(req *taskdb.Input) (interface{ Validate(any) error }, error) {
	v, err := ijson.Parse(req.Request, ijson.Limits{})
	if err != nil {
		return nil, err
	}
	obj, _ := v.(map[string]any)
	sch, err := ijson.Canonical(obj["inputSchema"])
	if err != nil {
		return nil, err
	}
	return e.schemas.Compile(sch)
}

// expireInputIfDue settles t failed agentgw:input-expired when the pending
// request's expiresAt is reached at this commit boundary. The spec allows
// issuing a new request instead; this engine settles.
func (b *batch) expireInputIfDue(t *taskdb.Task, req *taskdb.Input) (bool, error) {
	if req.ExpiresAt == "" || req.Status != taskdb.InputPending || t.InputRequest != req.RequestID {
		return false, nil
	}
	exp, err := xmpptime.Parse(req.ExpiresAt)
	if err == nil && !exp.ReachedBy(b.now()) {
		return false, nil
	}
	if !b.e.owns(t) {
		return true, nil // the owner's input timer settles it
	}
	if _, err := b.tx.SetInputStatus(t.ID, req.RequestID, taskdb.InputExpired, nil, 0); err != nil {
		return true, err
	}
	t.InputRequest = "" // settle must not supersede it again
	id, reqID := t.ID, req.RequestID
	b.onCommit(func() { b.e.deliverInput(id, reqID, nil, ErrInputExpired) })
	if err := b.fail(t, Failure{Code: agentproto.CodeInputExpired, Message: "The input request expired before an answer."}); err != nil {
		return true, err
	}
	return true, nil
}

// inputExpiryFired is the input expiry timer's settlement.
func (b *batch) inputExpiryFired(taskID, requestID string) error {
	t, err := b.load(taskID)
	if err != nil || t == nil || t.State.Terminal() || t.InputRequest != requestID {
		return err
	}
	if done, err := b.expireIfDue(t); done || err != nil {
		return err
	}
	req, err := b.tx.Input(taskID, requestID)
	if err != nil || req == nil {
		return err
	}
	expired, err := b.expireInputIfDue(t, req)
	if err != nil || expired {
		return err
	}
	// Fired at the truncated nanosecond of a finer expiresAt: re-arm.
	exp, _ := xmpptime.Parse(req.ExpiresAt)
	b.onCommit(func() { b.e.rearmInputExpiry(taskID, requestID, timerInstant(exp)) })
	return nil
}

func (e *Engine) rearmInputExpiry(taskID, requestID string, at time.Time) {
	e.mu.Lock()
	r := e.runs[taskID]
	e.mu.Unlock()
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.input == nil || r.input.requestID != requestID {
		return
	}
	if r.inputTimer != nil {
		r.inputTimer.Stop()
	}
	r.inputTimer = e.clock.AfterFunc(max(at.Sub(e.clock.Now()), time.Nanosecond), func() {
		e.submitDurable(func(b *batch) error { return b.inputExpiryFired(taskID, requestID) })
	})
}

// inputKey hashes the ordered input acceptance tuple.
func inputKey(in InputSubmission, canon []byte) []byte {
	h := sha256.New()
	field(h, "agentgw input acceptance v1")
	field(h, in.Caller)
	field(h, in.Endpoint)
	field(h, in.TaskID)
	field(h, in.RequestID)
	field(h, strconv.FormatInt(in.ExpectedRevision, 10))
	field(h, in.MediaType)
	field(h, string(canon))
	return h.Sum(nil)
}
