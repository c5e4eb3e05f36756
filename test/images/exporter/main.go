// Command exporter is the sidecar image the end-to-end tests run on a real
// node: a small Prometheus exporter that serves /metrics, /ready and
// /version, reports its version, and stops gracefully on SIGTERM.
// internal/realnode builds it, static, into the images that ask for it, as
// /bin/exporter and their default command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const usage = `exporter serves Prometheus metrics about itself.

  /metrics  sidecarset_test_exporter_info{version}, uptime and request counts
  /ready    200 while serving, 503 once it is shutting down
  /version  the version

On SIGTERM or SIGINT it reports not ready, waits -shutdown-delay, stops
accepting connections, lets the requests in flight finish within
-shutdown-timeout, and exits 0.

Flags:
`

// defaultListen is the exporter's port: the one assigned to mysqld_exporter
// in Prometheus's list of default ports, which the example SidecarSets name.
const defaultListen = ":9104"

// config is what the flags and the environment set.
type config struct {
	listen  string
	version string
	// shutdownDelay is how long /ready reports 503 while the exporter still
	// serves, so that whoever routes to it can notice before it stops.
	shutdownDelay time.Duration
	// shutdownTimeout bounds how long requests in flight may take.
	shutdownTimeout time.Duration
}

// parseConfig reads the flags in args. EXPORTER_LISTEN and EXPORTER_VERSION
// give defaults for -listen and -version; without a version from either,
// the first line of -version-file is the version.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	var versionFile string
	fs := flag.NewFlagSet("exporter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.listen, "listen", orDefault(getenv("EXPORTER_LISTEN"), defaultListen), "address to serve on (env EXPORTER_LISTEN)")
	fs.StringVar(&c.version, "version", getenv("EXPORTER_VERSION"), "the version to report (env EXPORTER_VERSION); default: the content of -version-file")
	fs.StringVar(&versionFile, "version-file", "/version", "file holding the version, read when -version is not given")
	fs.DurationVar(&c.shutdownDelay, "shutdown-delay", 0, "how long /ready reports 503 before the exporter stops serving")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long requests in flight may take once it stops serving")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q: exporter takes flags only", fs.Args())
	}
	if c.version == "" {
		data, err := os.ReadFile(versionFile)
		if err != nil {
			return config{}, fmt.Errorf("no version: give -version, set EXPORTER_VERSION or provide %s: %w", versionFile, err)
		}
		c.version, _, _ = strings.Cut(strings.TrimSpace(string(data)), "\n")
		if c.version == "" {
			return config{}, fmt.Errorf("no version: %s is empty", versionFile)
		}
	}
	if c.shutdownDelay < 0 || c.shutdownTimeout <= 0 {
		return config{}, fmt.Errorf("-shutdown-delay must not be negative and -shutdown-timeout must be positive, got %v and %v", c.shutdownDelay, c.shutdownTimeout)
	}
	return c, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Error("bad configuration", "err", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		log.Error("listen", "address", cfg.listen, "err", err)
		os.Exit(1)
	}
	if err := newExporter(cfg.version, time.Now).serve(ctx, ln, cfg, log); err != nil {
		log.Error("stopped", "err", err)
		os.Exit(1)
	}
}

// exporter holds the exporter's state and metrics.
type exporter struct {
	version  string
	now      func() time.Time
	started  time.Time
	ready    atomic.Bool
	registry *prometheus.Registry
	requests *prometheus.CounterVec
}

// newExporter registers the exporter's metrics in a registry of its own;
// now is the clock the uptime is read from.
func newExporter(version string, now func() time.Time) *exporter {
	e := &exporter{version: version, now: now, started: now(), registry: prometheus.NewRegistry()}
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sidecarset_test_exporter_info",
		Help: "Always 1; the version label is the exporter's version.",
	}, []string{"version"})
	info.WithLabelValues(version).Set(1)
	uptime := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sidecarset_test_exporter_uptime_seconds",
		Help: "Seconds since the exporter started.",
	}, func() float64 { return e.now().Sub(e.started).Seconds() })
	e.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sidecarset_test_exporter_http_requests_total",
		Help: "HTTP requests answered, by handler and status code.",
	}, []string{"handler", "code"})
	e.registry.MustRegister(info, uptime, e.requests)
	return e
}

// handler serves the exporter's paths, each counted once it is answered.
func (e *exporter) handler() http.Handler {
	mux := http.NewServeMux()
	count := func(name string, h http.Handler) http.Handler {
		return promhttp.InstrumentHandlerCounter(e.requests.MustCurryWith(prometheus.Labels{"handler": name}), h)
	}
	mux.Handle("GET /metrics", count("metrics", promhttp.HandlerFor(e.registry, promhttp.HandlerOpts{})))
	mux.Handle("GET /ready", count("ready", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !e.ready.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})))
	mux.Handle("GET /version", count("version", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, e.version)
	})))
	return mux
}

// serve serves on ln until ctx ends, then shuts down as the usage text
// says. It returns nil only when every request in flight finished in time.
func (e *exporter) serve(ctx context.Context, ln net.Listener, cfg config, log *slog.Logger) error {
	srv := &http.Server{Handler: e.handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	e.ready.Store(true)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving", "address", ln.Addr().String(), "version", e.version)
	select {
	case err := <-served:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	start := e.now()
	e.ready.Store(false)
	time.Sleep(cfg.shutdownDelay)
	// The signal's context has ended: the bound needs a context of its own.
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("requests still in flight %v after %w: %w", cfg.shutdownTimeout, context.Cause(ctx), err)
	}
	log.Info("stopped serving, requests in flight finished", "cause", context.Cause(ctx).Error(), "took", e.now().Sub(start).String())
	return nil
}
