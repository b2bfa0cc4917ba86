package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/schema"
)

func init() {
	register(command{name: "call", summary: "invoke an agent's tool, show live progress, answer input prompts, print the result", run: runCall})
}

// stdin is replaceable in tests.
var stdin io.Reader = os.Stdin

func runCall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("call", "call --jid JID AGENT_JID TOOL --args JSON [--deadline T] [--request-id ID] [--json]", stdout)
	cf := addCallerFlags(fs)
	argsJSON := fs.String("args", "{}", "tool arguments as a JSON object")
	deadline := fs.String("deadline", "", "XEP-0082 deadline, e.g. 2026-12-01T10:00:00Z")
	requestID := fs.String("request-id", "", "request-id to use (retry an earlier call with the same id to get the same task)")
	asJSON := fs.Bool("json", false, "print the terminal payload as JSON")
	var answers stringList
	fs.Var(&answers, "answer", "JSON answer for the next input prompt (repeatable; otherwise prompts read stdin)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("call takes AGENT_JID and TOOL")
	}
	ep, err := jid.Parse(pos[0])
	if err != nil || ep.Localpart() == "" {
		return usagef("%q is not an agent JID", pos[0])
	}
	if !json.Valid([]byte(*argsJSON)) {
		return usagef("--args is not valid JSON")
	}
	s, err := cf.connect(ctx, stderr)
	if err != nil {
		return err
	}
	defer s.Close()

	live := newLiveLine(stderr)
	reader := bufio.NewReader(stdin)
	opts := agentclient.CallOptions{
		RequestID: *requestID,
		Deadline:  *deadline,
		OnAccepted: func(a *agentclient.Accepted) {
			live.printf("accepted: task %s (request-id %s)", a.TaskID, a.RequestID)
			live.done()
		},
		OnStatus: func(state agentproto.State) {
			live.printf("state: %s", state)
		},
		OnProgress: func(p agentclient.Progress) {
			var parts []string
			if p.Percent != nil {
				parts = append(parts, fmt.Sprintf("%3.0f%%", *p.Percent))
			}
			if p.Stage != "" {
				parts = append(parts, "["+p.Stage+"]")
			}
			if p.Message != "" {
				parts = append(parts, p.Message)
			}
			live.printf("progress: %s", strings.Join(parts, " "))
		},
		OnInput: func(ctx context.Context, req agentclient.InputRequest) (json.RawMessage, error) {
			live.done()
			return promptInput(req, &answers, reader, stderr)
		},
	}
	out, err := s.client.Call(ctx, ep, pos[1], json.RawMessage(*argsJSON), opts)
	live.done()
	if err != nil {
		var ae *agentclient.ArgumentError
		if errors.As(err, &ae) {
			return exitError{code: 2, msg: ae.Error()}
		}
		return err
	}
	return printOutcome(stdout, out, *asJSON)
}

// promptInput asks for one input answer, validating it against the
// request's schema until it passes.
func promptInput(req agentclient.InputRequest, answers *stringList, r *bufio.Reader, w io.Writer) (json.RawMessage, error) {
	sch, err := schema.Compile(canonicalOrRaw(req.InputSchema))
	if err != nil {
		return nil, fmt.Errorf("the input request's schema cannot be used: %w", err)
	}
	fmt.Fprintf(w, "input requested: %s\n", req.Question)
	fmt.Fprintf(w, "  answer with a JSON object: %s\n", describeSchema(req.InputSchema))
	if req.ExpiresAt != "" {
		fmt.Fprintf(w, "  answer before %s\n", req.ExpiresAt)
	}
	for attempt := 0; attempt < 5; attempt++ {
		var line string
		if len(*answers) > 0 {
			line = (*answers)[0]
			*answers = (*answers)[1:]
			fmt.Fprintf(w, "answer> %s\n", line)
		} else {
			fmt.Fprint(w, "answer (JSON)> ")
			l, err := r.ReadString('\n')
			if err != nil && l == "" {
				return nil, errors.New("no input available on stdin")
			}
			line = strings.TrimSpace(l)
		}
		canon, v, err := ijson.Canonicalize([]byte(line), ijson.Limits{})
		if err != nil {
			fmt.Fprintf(w, "  not valid JSON: %v\n", err)
			continue
		}
		if err := sch.Validate(v); err != nil {
			fmt.Fprintf(w, "  does not match the schema: %v\n", err)
			continue
		}
		return canon, nil
	}
	return nil, errors.New("no valid answer after 5 attempts")
}

func canonicalOrRaw(b []byte) []byte {
	if c, _, err := ijson.Canonicalize(b, ijson.Limits{}); err == nil {
		return c
	}
	return b
}

// printOutcome prints the terminal state; failed and cancelled tasks exit 1.
func printOutcome(w io.Writer, out *agentclient.Outcome, asJSON bool) error {
	if asJSON {
		fmt.Fprintln(w, string(out.Payload))
	} else {
		printPayload(w, out.State, out.Payload)
	}
	if out.State == agentproto.StateCompleted {
		return nil
	}
	return exitError{code: 1}
}

func printPayload(w io.Writer, state agentproto.State, payload json.RawMessage) {
	switch state {
	case agentproto.StateCompleted:
		var p struct {
			Result struct {
				Content           []map[string]any `json:"content"`
				StructuredContent json.RawMessage  `json:"structuredContent"`
				IsError           bool             `json:"isError"`
			} `json:"result"`
		}
		if err := json.Unmarshal(payload, &p); err != nil {
			fmt.Fprintln(w, string(payload))
			return
		}
		if p.Result.IsError {
			fmt.Fprintln(w, "completed (the tool reported an error):")
		} else {
			fmt.Fprintln(w, "completed:")
		}
		for _, c := range p.Result.Content {
			switch c["type"] {
			case "text":
				fmt.Fprintf(w, "  %v\n", c["text"])
			case "image", "audio":
				data, _ := c["data"].(string)
				fmt.Fprintf(w, "  [%v %v, %d base64 bytes]\n", c["type"], c["mimeType"], len(data))
			default:
				b, _ := json.Marshal(c)
				fmt.Fprintf(w, "  %s\n", b)
			}
		}
		if len(p.Result.StructuredContent) > 0 && string(p.Result.StructuredContent) != "null" {
			fmt.Fprintf(w, "  structured: %s\n", p.Result.StructuredContent)
		}
	case agentproto.StateFailed:
		var p agentproto.FailedPayload
		json.Unmarshal(payload, &p)
		retry := ""
		if p.Error.Retryable {
			retry = " (retryable)"
		}
		fmt.Fprintf(w, "failed: %s: %s%s\n", p.Error.Code, p.Error.Message, retry)
	case agentproto.StateCancelled:
		fmt.Fprintf(w, "cancelled %s\n", string(payload))
	default:
		fmt.Fprintf(w, "%s %s\n", state, string(payload))
	}
}

// liveLine rewrites one status line in place on a terminal and prints
// plain lines elsewhere.
type liveLine struct {
	w    io.Writer
	tty  bool
	open bool
}

func newLiveLine(w io.Writer) *liveLine {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &liveLine{w: w, tty: tty}
}

func (l *liveLine) printf(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	if l.tty {
		fmt.Fprintf(l.w, "\r\033[K%s", s)
		l.open = true
		return
	}
	fmt.Fprintln(l.w, s)
}

func (l *liveLine) done() {
	if l.tty && l.open {
		fmt.Fprintln(l.w)
		l.open = false
	}
}

// describeSchema summarizes an object schema's fields for a prompt:
// "name* (string), age (integer), ..." with * marking required fields.
func describeSchema(raw json.RawMessage) string {
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(raw, &s) != nil || len(s.Properties) == 0 {
		if len(raw) > 300 {
			return string(raw[:300]) + "…"
		}
		return string(raw)
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if req[names[i]] != req[names[j]] {
			return req[names[i]]
		}
		return names[i] < names[j]
	})
	var parts []string
	for i, n := range names {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("… %d more", len(names)-i))
			break
		}
		var p struct {
			Type string `json:"type"`
			Enum []any  `json:"enum"`
		}
		json.Unmarshal(s.Properties[n], &p)
		mark := ""
		if req[n] {
			mark = "*"
		}
		desc := p.Type
		if len(p.Enum) > 0 {
			desc = fmt.Sprintf("one of %v", p.Enum)
		}
		parts = append(parts, fmt.Sprintf("%s%s (%s)", n, mark, desc))
	}
	return strings.Join(parts, ", ") + " — * required"
}
