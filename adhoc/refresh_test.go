package adhoc

import (
	"strings"
	"testing"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// TestEmptySubmitIsRefresh: Converse.js sends next/complete refreshes with
// an empty submit form. On a stage whose values were already taken that is
// a refresh, never a new submission of the first stage.
func TestEmptySubmitIsRefresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sid := e.start("echo", map[string]string{StageVar: "start", "message": "hi"})
	for _, action := range []string{"next", "complete", "execute"} {
		r, err := e.cmd(e.s, alice, "echo", sid, action, map[string]string{})
		if err != nil {
			t.Fatalf("%s with an empty form: %v", action, err)
		}
		if r.AttrValue("status") != "completed" || !strings.Contains(r.String(), "hi") {
			t.Fatalf("%s with an empty form: %s", action, r)
		}
	}
	// Only the stage field, as a client returning the hidden fields of the
	// first stage sends it: a refresh as well.
	if r, err := e.cmd(e.s, alice, "echo", sid, "next", map[string]string{StageVar: "start"}); err != nil || r.AttrValue("status") != "completed" {
		t.Fatalf("the first stage's hidden field alone: %v %v", r, err)
	}
	// Other values are still a conflict.
	if _, err := e.cmd(e.s, alice, "echo", sid, "complete", map[string]string{StageVar: "start", "message": "other"}); err == nil {
		t.Fatal("other values were accepted")
	}
}

// TestShortTaskCompletesAtOnce: a tool that finishes within the short wait
// answers completed with its result in the reply to the submission.
func TestShortTaskCompletesAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, err := e.cmd(e.s, alice, "echo", "", "execute", nil)
	if err != nil {
		t.Fatal(err)
	}
	sid := r.AttrValue("sessionid")
	done, err := e.cmd(e.s, alice, "echo", sid, "complete", map[string]string{StageVar: "start", "message": "at once"})
	if err != nil || done.AttrValue("status") != "completed" || !strings.Contains(done.String(), "at once") {
		t.Fatalf("the submission's reply: %v %v", done, err)
	}
}

// TestProgressInForm: a running task's stage carries its state and
// progress in the form's instructions, not only in a note, and the form's refresh comes back as a refresh.
func TestProgressInForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sid := e.start("slow", map[string]string{})
	want := "Progress: 40% — fetch — 2 of 5."
	r := e.untilOn(e.s, alice, "slow", sid, func(r *xmltree.Element) bool { return strings.Contains(noteOf(r, "info"), want) })
	x := r.Child(ns.Data, "x")
	if x == nil || x.Child(ns.Data, "instructions") == nil || !strings.Contains(x.Child(ns.Data, "instructions").Text, want) {
		t.Fatalf("the running stage has no progress form: %s", r)
	}
	fields := map[string]string{}
	for _, f := range x.ChildrenNamed(ns.Data, "field") {
		if f.AttrValue("type") == "hidden" {
			fields[f.AttrValue("var")] = f.Child(ns.Data, "value").Text
		}
	}
	again, err := e.cmd(e.s, alice, "slow", sid, "next", fields)
	if err != nil || !strings.Contains(again.String(), want) {
		t.Fatalf("refresh with the stage's hidden fields: %v %v", again, err)
	}
	if _, err := e.cmd(e.s, alice, "slow", sid, "cancel", nil); err != nil {
		t.Fatal(err)
	}
}
