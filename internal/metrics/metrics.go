// Package metrics exposes agentgw's Prometheus metrics (client_golang) and
// its health endpoints: /metrics, /healthz (the process is alive) and
// /readyz (the component stream is up and the store answers).
//
// The gateway owns one *Metrics, feeds it through plain method calls
// (AdmissionObserved, TaskSettled, SetConnected, ...) and, when
// [metrics] listen is set, runs Serve. Every metric lives in a private
// registry, so tests and several gateways in one process never collide.
// The metric list and its meaning are in docs/operations.md.
package metrics

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentgw/agentgw/agentproto"
)

// Outcomes of an invoke admission, the label values of AdmissionObserved.
const (
	OutcomeAccepted = "accepted" // a new task was committed
	OutcomeReplay   = "replay"   // a retried request-id returned the original task
	OutcomeConflict = "conflict" // request-id reuse with another fingerprint, or a stale version/hash
	OutcomeRejected = "rejected" // any other refusal (validation, policy, limits)
	outcomeOther    = "other"
)

var outcomes = []string{OutcomeAccepted, OutcomeReplay, OutcomeConflict, OutcomeRejected}

// The task states of urn:xmpp:agent-task:0; TaskSettled takes the terminal
// ones. Anything else is counted as "other" so a bug cannot grow the label
// set without bound.
var (
	taskStates     = stateNames(agentproto.States)
	terminalStates = stateNames(agentproto.TerminalStates)
)

func stateNames(states []agentproto.State) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// maxEndpointLabel bounds a backend endpoint label (a bare JID is at most
// 3×1023 bytes; real ones are far shorter).
const maxEndpointLabel = 512

// sourceTimeout bounds one call of the task-state source during a scrape.
const sourceTimeout = 5 * time.Second

// Buckets, in seconds. Admission is one SQLite transaction (sub-millisecond
// to tens of milliseconds); tasks run from a fraction of a second to the
// default one-hour deadline and beyond.
var (
	admissionBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
	taskBuckets      = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200}
)

// TaskStateSource returns the number of tasks in each state, read from the
// store. It is called on every scrape of /metrics, with a bounded context.
type TaskStateSource func(ctx context.Context) (map[string]int, error)

// Readiness decides /readyz. reason is one short line for the operator; it
// is ignored when ready is true.
type Readiness func() (ready bool, reason string)

// Metrics holds agentgw's collectors. The zero value is not usable; call
// New. All methods are safe for concurrent use, and every method is a no-op
// on a nil *Metrics, so code can report unconditionally.
type Metrics struct {
	reg *prometheus.Registry

	admissions       *prometheus.CounterVec
	replays          prometheus.Counter
	conflicts        prometheus.Counter
	admissionSeconds *prometheus.HistogramVec
	taskSeconds      *prometheus.HistogramVec
	eventSendFails   prometheus.Counter
	connected        prometheus.Gauge
	reconnects       prometheus.Counter
	iqAnswers        *prometheus.CounterVec
	backendUp        *prometheus.GaugeVec

	isConnected atomic.Bool

	mu         sync.RWMutex
	source     TaskStateSource
	readiness  Readiness
	storeCheck func(ctx context.Context) error
}

// New returns a Metrics whose private registry holds agentgw's metrics and
// the standard Go runtime, process and build-info collectors.
func New() *Metrics { return NewInstance("") }

// InstanceLabel is the label NewInstance puts on every series, naming the
// cluster member that exports it. It is not "instance", which Prometheus
// sets to the scrape target itself.
const InstanceLabel = "gateway_instance"

// NewInstance is New for one of several gateway instances sharing a
// database: every series carries InstanceLabel=instance, so the members'
// series stay apart when aggregated. An empty instance labels nothing.
func NewInstance(instance string) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentgw_admissions_total",
			Help: "Invoke requests decided by admission, by outcome (accepted, replay, conflict, rejected).",
		}, []string{"outcome"}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentgw_replays_total",
			Help: "Invoke requests answered from the replay record of an earlier identical request.",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentgw_conflicts_total",
			Help: "Invoke requests refused with conflict (request-id reused with another fingerprint, or a stale version or hash).",
		}),
		admissionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentgw_admission_duration_seconds",
			Help:    "Time from receiving an invoke to its IQ answer being ready (validation and the admission commit), by outcome.",
			Buckets: admissionBuckets,
		}, []string{"outcome"}),
		taskSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentgw_task_duration_seconds",
			Help:    "Time from admission to terminal settlement, by terminal state.",
			Buckets: taskBuckets,
		}, []string{"state"}),
		eventSendFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentgw_event_send_failures_total",
			Help: "Committed lifecycle events whose message could not be handed to the component (the task state stays recoverable).",
		}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentgw_component_connected",
			Help: "1 while the XEP-0114 stream to the XMPP server is up, else 0.",
		}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentgw_component_reconnects_total",
			Help: "Connection attempts to the XMPP server after a lost or failed stream.",
		}),
		iqAnswers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentgw_component_iq_answers_total",
			Help: "Cluster mode: IQ answers read by this member for another member and forwarded to it (forwarded), forwarded here by another member (relayed), or dropped because nobody waited for them or they could not be forwarded (dropped).",
		}, []string{"path"}),
		backendUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentgw_backend_up",
			Help: "1 while an agent endpoint's backend (MCP server or connector) is available, else 0.",
		}, []string{"endpoint"}),
	}
	for _, p := range []string{"forwarded", "relayed", "dropped"} {
		m.iqAnswers.WithLabelValues(p)
	}
	for _, o := range outcomes {
		m.admissions.WithLabelValues(o)
		m.admissionSeconds.WithLabelValues(o)
	}
	for _, s := range terminalStates {
		m.taskSeconds.WithLabelValues(s)
	}
	var reg prometheus.Registerer = m.reg
	if instance != "" {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{InstanceLabel: instance}, m.reg)
	}
	reg.MustRegister(
		m.admissions, m.replays, m.conflicts, m.admissionSeconds, m.taskSeconds,
		m.eventSendFails, m.connected, m.reconnects, m.iqAnswers, m.backendUp,
		newTaskCollector(m),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	)
	return m
}

// Registry is the private registry, for tests and for adding collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// AdmissionObserved records one decided invoke: d is the time from receipt
// to the answer, outcome one of the Outcome constants (anything else counts
// as "other").
func (m *Metrics) AdmissionObserved(d time.Duration, outcome string) {
	if m == nil {
		return
	}
	switch outcome {
	case OutcomeAccepted, OutcomeRejected:
	case OutcomeReplay:
		m.replays.Inc()
	case OutcomeConflict:
		m.conflicts.Inc()
	default:
		outcome = outcomeOther
	}
	m.admissions.WithLabelValues(outcome).Inc()
	m.admissionSeconds.WithLabelValues(outcome).Observe(d.Seconds())
}

// TaskSettled records a task reaching a terminal state after d since its
// admission.
func (m *Metrics) TaskSettled(state string, d time.Duration) {
	if m == nil {
		return
	}
	if !contains(terminalStates, state) {
		state = outcomeOther
	}
	m.taskSeconds.WithLabelValues(state).Observe(max(d, 0).Seconds())
}

// EventSendFailed records a lifecycle message that could not be sent.
func (m *Metrics) EventSendFailed() {
	if m == nil {
		return
	}
	m.eventSendFails.Inc()
}

// SetConnected records whether the component stream is up. It also drives
// the default readiness rule.
func (m *Metrics) SetConnected(up bool) {
	if m == nil {
		return
	}
	m.isConnected.Store(up)
	if up {
		m.connected.Set(1)
	} else {
		m.connected.Set(0)
	}
}

// Reconnected records one reconnection attempt to the XMPP server.
func (m *Metrics) Reconnected() {
	if m == nil {
		return
	}
	m.reconnects.Inc()
}

// AddIQAnswers records cluster IQ answers by path: forwarded to another
// member, relayed here by one, dropped.
func (m *Metrics) AddIQAnswers(forwarded, relayed, dropped uint64) {
	if m == nil {
		return
	}
	m.iqAnswers.WithLabelValues("forwarded").Add(float64(forwarded))
	m.iqAnswers.WithLabelValues("relayed").Add(float64(relayed))
	m.iqAnswers.WithLabelValues("dropped").Add(float64(dropped))
}

// SetBackendUp records an endpoint's backend availability.
func (m *Metrics) SetBackendUp(endpoint string, up bool) {
	if m == nil {
		return
	}
	if len(endpoint) > maxEndpointLabel {
		endpoint = endpoint[:maxEndpointLabel]
	}
	v := 0.0
	if up {
		v = 1
	}
	m.backendUp.WithLabelValues(endpoint).Set(v)
}

// RemoveBackend drops an endpoint's availability series (an agent removed
// from the config at a reload).
func (m *Metrics) RemoveBackend(endpoint string) {
	if m == nil {
		return
	}
	if len(endpoint) > maxEndpointLabel {
		endpoint = endpoint[:maxEndpointLabel]
	}
	m.backendUp.DeleteLabelValues(endpoint)
}

// SetTaskStateSource sets the function behind agentgw_tasks{state}. Every
// known state is exported, zero when the source does not name it.
func (m *Metrics) SetTaskStateSource(f TaskStateSource) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.source = f
	m.mu.Unlock()
}

// SetStoreCheck sets the store probe of the default readiness rule, for
// example a ping of the store's write handle. Until it is set the default
// rule reports "store: not open".
func (m *Metrics) SetStoreCheck(f func(ctx context.Context) error) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.storeCheck = f
	m.mu.Unlock()
}

// SetReadiness replaces the default readiness rule (component connected,
// per SetConnected, and the store check passing) with f.
func (m *Metrics) SetReadiness(f Readiness) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.readiness = f
	m.mu.Unlock()
}

// Ready evaluates readiness as /readyz does.
func (m *Metrics) Ready(ctx context.Context) (bool, string) {
	if m == nil {
		return false, "metrics: not configured"
	}
	m.mu.RLock()
	f, store := m.readiness, m.storeCheck
	m.mu.RUnlock()
	if f != nil {
		ok, reason := f()
		if !ok && reason == "" {
			reason = "not ready"
		}
		return ok, oneLine(reason)
	}
	if !m.isConnected.Load() {
		return false, "component: not connected to the XMPP server"
	}
	if store == nil {
		return false, "store: not open"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := store(ctx); err != nil {
		return false, oneLine("store: " + err.Error())
	}
	return true, ""
}

// taskCollector exports agentgw_tasks{state} from the source at scrape
// time, so the figure is the committed truth rather than a running tally.
type taskCollector struct {
	m      *Metrics
	desc   *prometheus.Desc
	errors prometheus.Counter
}

func newTaskCollector(m *Metrics) *taskCollector {
	return &taskCollector{
		m: m,
		desc: prometheus.NewDesc("agentgw_tasks",
			"Tasks in the store by state, read at scrape time (terminal tasks count until retention removes them).",
			[]string{"state"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentgw_task_state_source_errors_total",
			Help: "Scrapes where the task counts could not be read from the store (agentgw_tasks is then missing).",
		}),
	}
}

func (c *taskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	c.errors.Describe(ch)
}

func (c *taskCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.RLock()
	src := c.m.source
	c.m.mu.RUnlock()
	if src != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sourceTimeout)
		counts, err := src(ctx)
		cancel()
		if err != nil {
			c.errors.Inc()
		} else {
			for _, s := range stateLabels(counts) {
				ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), s)
			}
		}
	}
	c.errors.Collect(ch)
}

// stateLabels lists every known state plus any other the source reported
// (the source is our own store, so its label set is bounded).
func stateLabels(counts map[string]int) []string {
	out := append([]string(nil), taskStates...)
	var extra []string
	for s := range counts {
		if !contains(taskStates, s) && validLabel(s) {
			extra = append(extra, s)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}

func validLabel(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// oneLine keeps a readiness reason to one bounded line.
func oneLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
