package mcpbridge
import ("testing";"strings")
func TestDbgMiss(t *testing.T) {
	for i := 0; i < 30; i++ {
		s := start(t, rawAgent(t, "secretsecret"), nil)
		if strings.Contains(s.logs.String(), "unavailable; using") {
			for _, f := range s.framesCopy() { l := string(f.data); if len(l) > 200 { l = l[:200] }; t.Logf("%v %s", f.out, l) }
			t.Fatalf("miss at %d", i)
		}
		s.stop()
	}
}
