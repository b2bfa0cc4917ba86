package admincmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/xep/dataform"
)

// command is one admin command: its node name, form and action.
type command struct {
	name, title, help string
	fields            []dataform.Field
	// offered, when set, says whether the store it needs is there.
	offered func() bool
	run     func(ctx context.Context, v map[string][]string) (result, error)
}

type result struct {
	note string
	form *dataform.Form
}

// badInput is a submission the command cannot read: an IQ error
// (bad-request), its text a fixed sentence that never quotes the input.
type badInput string

func (b badInput) Error() string { return string(b) }

// maxManifestBytes bounds the manifest field, as the admin IQ's stanza
// size does.
const maxManifestBytes = 1 << 20

func one(v map[string][]string, name string) string {
	if len(v[name]) == 0 {
		return ""
	}
	return strings.TrimSpace(v[name][0])
}

// endpoint reads a required bare JID with a localpart.
func endpoint(v map[string][]string, name string) (string, error) {
	s := one(v, name)
	j, err := jid.Parse(s)
	if s == "" || err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
		return "", badInput("The " + name + " field must be an endpoint's bare JID (name@domain).")
	}
	return j.String(), nil
}

func principal(v map[string][]string) (string, error) {
	p, err := config.ParsePrincipal(one(v, "principal"))
	if err != nil {
		return "", badInput("The principal field must be a domain or a bare JID.")
	}
	return p, nil
}

func scope(v map[string][]string) (federation.Scope, error) {
	var s federation.Scope
	for _, x := range v["scope"] {
		switch strings.TrimSpace(x) {
		case "visibility":
			s |= federation.ScopeVisibility
		case "invocation":
			s |= federation.ScopeInvocation
		default:
			return 0, badInput("The scope field takes visibility and invocation only.")
		}
	}
	return s, nil
}

// grantInput reads the principal, scope and endpoint fields of the trust
// forms.
func grantInput(v map[string][]string) (p string, sc federation.Scope, ep string, err error) {
	if p, err = principal(v); err != nil {
		return
	}
	if sc, err = scope(v); err != nil {
		return
	}
	ep, err = optionalEndpoint(v)
	return
}

func optionalEndpoint(v map[string][]string) (string, error) {
	if one(v, "endpoint") == "" {
		return "", nil
	}
	return endpoint(v, "endpoint")
}

func label(ep string) string {
	if ep == "" {
		return "every endpoint"
	}
	return ep
}

// refusal is the note for an operation the stores refused: fixed
// sentences, never the input.
func refusal(err error) string {
	var ve *directory.ValidationError
	switch {
	case errors.As(err, &ve):
		return "The manifest failed validation: " + ve.Reason
	case errors.Is(err, directory.ErrTooLarge):
		return "The manifest exceeds a size or complexity limit."
	case errors.Is(err, directory.ErrConflict):
		return "The version is already registered with different content."
	case errors.Is(err, directory.ErrHashMismatch):
		return "The hash does not match the registered version."
	case errors.Is(err, directory.ErrActive):
		return "The version is active; deactivate or activate another version first."
	case errors.Is(err, directory.ErrReferenced):
		return "Retained tasks still reference the version."
	case errors.Is(err, directory.ErrForeignDomain):
		return "The manifest's agent.jid is outside the domain this gateway answers for."
	case errors.Is(err, directory.ErrBadEndpoint):
		return "That is not a valid endpoint identifier."
	case errors.Is(err, directory.ErrNotFound), errors.Is(err, errNotFound), errors.Is(err, tasks.ErrNotFound):
		return "No such endpoint, version, grant or task."
	case errors.Is(err, tasks.ErrConflict):
		return "The task has already settled, or another cancellation was accepted."
	case errors.Is(err, tasks.ErrServiceUnavailable):
		return "The task cannot be cancelled now: its backend does not support cancellation, or the engine is not running."
	}
	return "The operation failed; the gateway's log has the reason."
}

var errNotFound = errors.New("admincmd: not found")

// taskID reads the form's task field.
func taskID(v map[string][]string) (string, error) {
	id := one(v, "task")
	if !ids.Valid(id) {
		return "", badInput("The task field must be a task ID.")
	}
	return id, nil
}

var scopeOptions = []dataform.Option{{Label: "Visibility (discovery, manifests, search)", Value: "visibility"}, {Label: "Invocation", Value: "invocation"}}

func table(s *Service) []*command {
	d := &s.d
	endpointField := dataform.Field{Var: "endpoint", Type: dataform.FieldJIDSingle, Label: "Endpoint JID", Required: true}
	grantFields := []dataform.Field{
		{Var: "principal", Label: "Remote domain or bare JID", Required: true},
		{Var: "scope", Type: dataform.FieldListMulti, Label: "Scope", Options: scopeOptions},
		{Var: "endpoint", Type: dataform.FieldJIDSingle, Label: "Only this endpoint (empty: every endpoint)"},
	}
	return []*command{
		{name: "register", title: "Register a manifest", help: "Paste an endpoint manifest (JSON). Registering identical content again is a no-op.",
			fields: []dataform.Field{
				{Var: "manifest", Type: dataform.FieldTextMulti, Label: "Manifest JSON", Required: true},
				{Var: "activate", Type: dataform.FieldBoolean, Label: "Activate it", Values: []string{"false"}},
			},
			run: func(ctx context.Context, v map[string][]string) (result, error) {
				raw := strings.Join(v["manifest"], "\n")
				if strings.TrimSpace(raw) == "" || len(raw) > maxManifestBytes {
					return result{}, badInput("The manifest field must hold one manifest of at most 1 MiB.")
				}
				m, err := d.Admin.Register(ctx, []byte(raw))
				if err != nil {
					return result{}, err
				}
				msg := fmt.Sprintf("Registered %s version %s (sha-256 %s).", m.Endpoint, m.Version, m.Hash)
				if act, _ := dataform.ParseBool(one(v, "activate")); act {
					if err := d.Admin.Activate(ctx, m.Endpoint, m.Version, m.Hash); err != nil {
						return result{}, err
					}
					msg += " It is active."
				}
				return result{note: msg}, nil
			}},
		{name: "activate", title: "Activate a version", help: "Select the active version of an endpoint by its version and manifest hash.",
			fields: []dataform.Field{endpointField, {Var: "version", Label: "Version", Required: true}, {Var: "hash", Label: "sha-256 hash (base64)", Required: true}},
			run: func(ctx context.Context, v map[string][]string) (result, error) {
				ep, err := endpoint(v, "endpoint")
				if err != nil {
					return result{}, err
				}
				version, hash := one(v, "version"), one(v, "hash")
				if version == "" || hash == "" || len(version) > 256 || len(hash) > 256 {
					return result{}, badInput("The version and hash fields are required.")
				}
				if err := d.Admin.Activate(ctx, ep, version, hash); err != nil {
					return result{}, err
				}
				return result{note: fmt.Sprintf("Activated %s version %s.", ep, version)}, nil
			}},
		{name: "deactivate", title: "Deactivate an endpoint", help: "Hide the endpoint; its manifests are kept.",
			fields: []dataform.Field{endpointField},
			run: func(ctx context.Context, v map[string][]string) (result, error) {
				ep, err := endpoint(v, "endpoint")
				if err != nil {
					return result{}, err
				}
				if err := d.Admin.Deactivate(ctx, ep); err != nil {
					return result{}, err
				}
				return result{note: fmt.Sprintf("Deactivated %s (its manifests are kept).", ep)}, nil
			}},
		{name: "status", title: "Endpoint status", help: "The registered versions of an endpoint, their hashes, which is active and which may be removed.",
			fields: []dataform.Field{endpointField},
			run: func(ctx context.Context, v map[string][]string) (result, error) {
				ep, err := endpoint(v, "endpoint")
				if err != nil {
					return result{}, err
				}
				st, err := d.Admin.Status(ctx, ep)
				if err != nil {
					return result{}, err
				}
				active := st.Active
				if active == "" {
					active = "none (deactivated)"
				}
				f := &dataform.Form{Title: st.Endpoint, Reported: []dataform.Field{
					{Var: "version", Label: "Version"}, {Var: "hash", Label: "sha-256"},
					{Var: "active", Label: "Active", Type: dataform.FieldBoolean}, {Var: "removable", Label: "Removable", Type: dataform.FieldBoolean}}}
				for _, x := range st.Versions {
					f.Items = append(f.Items, []dataform.Field{{Var: "version", Values: []string{x.Version}}, {Var: "hash", Values: []string{x.Hash}},
						{Var: "active", Values: []string{dataform.Bool(x.Active)}}, {Var: "removable", Values: []string{dataform.Bool(x.Removable)}}})
				}
				return result{note: fmt.Sprintf("%s: active version %s, %d registered.", st.Endpoint, active, len(st.Versions)), form: f}, nil
			}},
		{name: "trust-grant", title: "Grant federation trust", help: "Let a remote domain or JID see and/or invoke endpoints. A running gateway applies it within a second.",
			fields:  grantFields,
			offered: func() bool { return d.Grants != nil },
			run: func(ctx context.Context, v map[string][]string) (result, error) {
				p, sc, ep, err := grantInput(v)
				if err != nil {
					return result{}, err
				}
				if sc == 0 {
					return result{}, badInput("Choose visibility, invocation or both.")
				}
				if err := d.Grants.Grant(ctx, federation.Grant{Principal: p, Endpoint: ep, Scope: sc}); err != nil {
					return result{}, err
				}
				msg := fmt.Sprintf("Granted %s to %s on %s.", federation.ScopeString(sc), p, label(ep))
				if d.IsLocal(p) {
					msg += " Note: it is a local principal, governed by the config, not by grants."
				}
				return result{note: msg}, nil
			}},
		{name: "trust-revoke", title: "Revoke federation trust", help: "Take a grant back (no scope chosen: both).",
			fields:  grantFields,
			offered: func() bool { return d.Grants != nil },
			run: func(ctx context.Context, v map[string][]string) (result, error) {
				p, sc, ep, err := grantInput(v)
				if err != nil {
					return result{}, err
				}
				if sc == 0 {
					sc = federation.ScopeVisibility | federation.ScopeInvocation
				}
				removed, err := d.Grants.Revoke(ctx, p, ep, sc)
				if err != nil {
					return result{}, err
				}
				if !removed {
					return result{}, errNotFound
				}
				return result{note: fmt.Sprintf("Revoked %s from %s on %s.", federation.ScopeString(sc), p, label(ep))}, nil
			}},
		{name: "trust-list", title: "List federation trust", help: "Every grant.",
			offered: func() bool { return d.Grants != nil },
			run: func(ctx context.Context, v map[string][]string) (result, error) {
				gs, err := d.Grants.List(ctx)
				if err != nil {
					return result{}, err
				}
				f := &dataform.Form{Title: "Federation grants", Reported: []dataform.Field{
					{Var: "principal", Label: "Principal"}, {Var: "endpoint", Label: "Endpoint"}, {Var: "scope", Label: "Scope"}, {Var: "since", Label: "Since"}}}
				for _, g := range gs {
					f.Items = append(f.Items, []dataform.Field{{Var: "principal", Values: []string{g.Principal}}, {Var: "endpoint", Values: []string{label(g.Endpoint)}},
						{Var: "scope", Values: []string{federation.ScopeString(g.Scope)}}, {Var: "since", Values: []string{g.Created.UTC().Format(time.RFC3339)}}})
				}
				if len(gs) == 0 {
					return result{note: "No grants: remote domains see and invoke nothing."}, nil
				}
				return result{note: fmt.Sprintf("%d grants.", len(gs)), form: f}, nil
			}},
		{name: "ban", title: "Ban a self-registered endpoint", help: "Deactivate it and refuse its re-registration until unbanned; the ban survives restarts.",
			fields:  []dataform.Field{endpointField, {Var: "reason", Label: "Reason (kept with the ban)"}},
			offered: func() bool { return d.SelfReg != nil },
			run: func(ctx context.Context, v map[string][]string) (result, error) {
				ep, err := endpoint(v, "endpoint")
				if err != nil {
					return result{}, err
				}
				reason := one(v, "reason")
				if len(reason) > 1024 {
					return result{}, badInput("The reason is limited to 1024 bytes.")
				}
				// Ban first: a registration racing the ban must find it.
				if err := d.SelfReg.Ban(ctx, ep, reason, d.Now()); err != nil {
					return result{}, err
				}
				if err := d.Admin.Deactivate(ctx, ep); err != nil && !errors.Is(err, directory.ErrNotFound) {
					return result{}, err
				}
				return result{note: fmt.Sprintf("Banned %s: deactivated, and its self-registration is refused until unban.", ep)}, nil
			}},
		{name: "unban", title: "Unban a self-registered endpoint", help: "Lift a ban; the endpoint is listed again once it registers and activates.",
			fields:  []dataform.Field{endpointField},
			offered: func() bool { return d.SelfReg != nil },
			run: func(ctx context.Context, v map[string][]string) (result, error) {
				ep, err := endpoint(v, "endpoint")
				if err != nil {
					return result{}, err
				}
				ok, err := d.SelfReg.Unban(ctx, ep)
				if err != nil {
					return result{}, err
				}
				if !ok {
					return result{}, errNotFound
				}
				return result{note: fmt.Sprintf("Unbanned %s.", ep)}, nil
			}},
		{name: "task", title: "Look a task up", help: "A task's state by its task ID, whoever invoked it.",
			fields:  []dataform.Field{{Var: "task", Label: "Task ID", Required: true}},
			offered: func() bool { return d.Tasks != nil },
			run: func(ctx context.Context, v map[string][]string) (result, error) {
				id, err := taskID(v)
				if err != nil {
					return result{}, err
				}
				t, _, err := d.Tasks.TaskState(ctx, id)
				if err != nil {
					return result{}, err
				}
				if t == nil {
					return result{}, errNotFound
				}
				row := func(v, l, x string) dataform.Field { return dataform.Field{Var: v, Label: l, Values: []string{x}} }
				f := &dataform.Form{Title: "Task " + t.ID, Fields: []dataform.Field{
					row("state", "State", string(t.State)), row("revision", "Revision", fmt.Sprint(t.Revision)),
					row("endpoint", "Endpoint", t.Endpoint), row("tool", "Tool", t.Tool), row("caller", "Caller", t.Caller),
					row("created", "Created", t.Created.UTC().Format(time.RFC3339)), row("updated", "Updated", t.Updated.UTC().Format(time.RFC3339)),
					row("retain-until", "Retained until", t.RetainUntil.UTC().Format(time.RFC3339)),
				}}
				return result{note: fmt.Sprintf("Task %s is %s at revision %d.", t.ID, t.State, t.Revision), form: f}, nil
			}},
		{name: "task-cancel", title: "Cancel a task", help: "Cancel a task on its caller's behalf, whoever invoked it; the task settles as any cancelled task does.",
			fields:  []dataform.Field{{Var: "task", Label: "Task ID", Required: true}},
			offered: func() bool { return d.Cancel != nil },
			run: func(ctx context.Context, v map[string][]string) (result, error) {
				id, err := taskID(v)
				if err != nil {
					return result{}, err
				}
				admin, via := adminFrom(ctx)
				if _, err := d.Cancel(ctx, id, admin, via); err != nil {
					return result{}, err
				}
				return result{note: fmt.Sprintf("Cancellation of task %s requested; it settles as cancelled once its backend stops.", id)}, nil
			}},
	}
}
