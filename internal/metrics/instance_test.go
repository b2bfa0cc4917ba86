package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestInstanceLabel(t *testing.T) {
	scrape := func(m *Metrics) string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	m := NewInstance("gw-2")
	m.AdmissionObserved(0, OutcomeAccepted)
	body := scrape(m)
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "agentgw_") && !strings.Contains(line, `gateway_instance="gw-2"`) {
			t.Fatalf("series without the instance label: %s", line)
		}
	}
	if !strings.Contains(body, `agentgw_admissions_total{gateway_instance="gw-2",outcome="accepted"} 1`) {
		t.Fatalf("admissions not labelled:\n%s", body)
	}
	if strings.Contains(scrape(New()), "gateway_instance") {
		t.Fatal("a single instance's series carry the instance label")
	}
}
