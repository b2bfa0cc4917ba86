package accbridge

import (
	"testing"
	"time"
)

// TestSettledLateFrames: a run_cancelled for a run this connector had and
// the gateway settled is taken (and releases the agent); another
// connector's run, an unknown run and other frame types are not.
func TestSettledLateFrames(t *testing.T) {
	t.Parallel()
	var st settled
	st.noteEnded("r1", "conn-a", "farm\x00agent-1", true, time.Time{})
	h := st.hold("farm\x00agent-1")
	if h == nil || h.runID != "r1" {
		t.Fatalf("no hold after an unconfirmed cancel: %+v", h)
	}
	if st.late("conn-b", &frame{Type: TypeRunCancelled, RunID: "r1"}) {
		t.Fatal("another connector's run_cancelled was taken")
	}
	if st.late("conn-a", &frame{Type: TypeRunCancelled, RunID: "nope"}) {
		t.Fatal("a run_cancelled for an unknown run was taken")
	}
	if st.late("conn-a", &frame{Type: TypeRunAccepted, RunID: "r1"}) {
		t.Fatal("a late run_accepted was taken silently")
	}
	select {
	case <-h.released:
		t.Fatal("released by a frame that does not end the run")
	default:
	}
	if !st.late("conn-a", &frame{Type: TypeRunCancelled, RunID: "r1"}) {
		t.Fatal("the late confirmation was refused")
	}
	select {
	case <-h.released:
	default:
		t.Fatal("the confirmation did not release the agent")
	}
	if st.hold("farm\x00agent-1") != nil {
		t.Fatal("the hold outlived its release")
	}
	// A completion of the held run also releases it (and is not silent).
	st.noteEnded("r2", "conn-a", "farm\x00agent-1", true, time.Time{})
	h = st.hold("farm\x00agent-1")
	if st.late("conn-a", &frame{Type: TypeRunEvent, Event: EventCompletion, RunID: "r2"}) {
		t.Fatal("a late completion was answered silently")
	}
	select {
	case <-h.released:
	default:
		t.Fatal("a late completion did not release the agent")
	}
	// A hold older than the release bound is gone.
	st.noteEnded("r3", "conn-a", "farm\x00agent-2", true, time.Time{})
	st.mu.Lock()
	st.holds["farm\x00agent-2"].since = time.Now().Add(-releaseBound)
	st.mu.Unlock()
	if st.hold("farm\x00agent-2") != nil {
		t.Fatal("a hold past the release bound")
	}
	// Bounded memory.
	for i := 0; i < endedMax+10; i++ {
		st.noteEnded("x"+string(rune('a'+i%26))+time.Duration(i).String(), "conn-a", "k", false, time.Time{})
	}
	if len(st.ended) > endedMax || len(st.order) > endedMax {
		t.Fatalf("remembered %d runs", len(st.ended))
	}
}
