package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// shutdownGrace bounds how long Serve waits for in-flight scrapes once its
// context ends.
const shutdownGrace = 2 * time.Second

// Handler serves /metrics, /healthz and /readyz. Anything else is 404;
// methods other than GET and HEAD are 405.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A failing collector (the task source) must not hide the rest.
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
		Registry:            m.reg, // exports promhttp_metric_handler_errors_total
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		plain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if ok, reason := m.Ready(r.Context()); !ok {
			plain(w, http.StatusServiceUnavailable, "not ready: "+reason)
			return
		}
		plain(w, http.StatusOK, "ready")
	})
	return getOnly(mux)
}

func getOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			plain(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func plain(w http.ResponseWriter, code int, line string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, line)
}

// Serve listens on addr (host:port, e.g. "127.0.0.1:9464") and serves
// Handler until ctx ends. It returns nil after ctx ends and an error when
// it cannot listen or serving fails.
func (m *Metrics) Serve(ctx context.Context, addr string) error {
	if addr == "" {
		return errors.New("metrics: no listen address")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	return m.ServeListener(ctx, ln)
}

// ServeListener is Serve on a listener the caller opened (tests use
// 127.0.0.1:0). It closes ln.
func (m *Metrics) ServeListener(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           m.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			defer cancel()
			if srv.Shutdown(sctx) != nil {
				srv.Close()
			}
		case <-done:
		}
	}()
	err := srv.Serve(ln)
	close(done)
	<-stopped // Shutdown has drained in-flight scrapes
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("metrics: %w", err)
}
