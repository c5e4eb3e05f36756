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
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
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

Hot upgrade handoff: with -handoff-dir DIR it is one of two containers of a
pod that share the network and DIR. SIDECARSET_VERSION is its version and
SIDECARSET_VERSION_ALT the other container's when this one started, 0 for
an empty image (missing or not a number: 0). It binds the port with
SO_REUSEPORT. While serving it keeps -serving-file (for an exec readiness
probe) and answers on DIR/exporter-<version>.sock: the line "release" makes
it stop accepting, finish the requests in flight, remove -serving-file,
answer "released" with its listening sockets attached (SCM_RIGHTS: the
connections queued on them are not lost) and idle until SIGTERM. A newer
version than the other's binds the port, serves, sends "release" to the
other and serves the sockets it gets too; an older one idles, not
listening.

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
	// handoffDir turns the hot upgrade handoff on; it holds the control
	// sockets.
	handoffDir string
	// servingFile exists while the exporter serves in the handoff mode:
	// the two containers share the port, so only an exec probe of their
	// own root file systems tells them apart.
	servingFile string
}

// parseConfig reads the flags in args. EXPORTER_LISTEN, EXPORTER_VERSION,
// EXPORTER_HANDOFF_DIR and EXPORTER_SERVING_FILE give defaults for the flags
// of the same names; without a version from either, the first line of
// -version-file is the version.
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
	fs.StringVar(&c.handoffDir, "handoff-dir", getenv("EXPORTER_HANDOFF_DIR"), "directory shared with the other container, for the hot upgrade handoff (env EXPORTER_HANDOFF_DIR); empty: off")
	fs.StringVar(&c.servingFile, "serving-file", orDefault(getenv("EXPORTER_SERVING_FILE"), "/tmp/serving"), "file that exists while it serves, in the handoff mode only (env EXPORTER_SERVING_FILE)")
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
	if err := run(ctx, cfg, os.Getenv, log); err != nil {
		log.Error("stopped", "err", err)
		os.Exit(1)
	}
}

// run serves as cfg says until ctx ends; getenv gives the versions the
// handoff mode reads.
func run(ctx context.Context, cfg config, getenv func(string) string, log *slog.Logger) error {
	if cfg.handoffDir != "" {
		return runHandoff(ctx, cfg, getenv, log)
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.listen, err)
	}
	return newExporter(cfg.version, time.Now).serve(ctx, ln, cfg, nil, log)
}

// exporter holds the exporter's state and metrics.
type exporter struct {
	version  string
	now      func() time.Time
	started  time.Time
	ready    atomic.Bool
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	// unread holds, in the handoff mode, the connections whose first
	// request is not read yet.
	mu     sync.Mutex
	unread map[net.Conn]struct{}
}

// newExporter registers the exporter's metrics in a registry of its own;
// now is the clock the uptime is read from.
func newExporter(version string, now func() time.Time) *exporter {
	e := &exporter{version: version, now: now, started: now(), registry: prometheus.NewRegistry(), unread: map[net.Conn]struct{}{}}
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
// With h (the handoff mode), it takes over once it serves, and a release
// request ends serving early.
func (e *exporter) serve(ctx context.Context, ln net.Listener, cfg config, h *handoff, log *slog.Logger) error {
	srv := &http.Server{Handler: e.handler(), ReadHeaderTimeout: 10 * time.Second}
	if h != nil {
		srv.ConnState = e.trackUnread
	}
	// The first failure is enough; Serve fails on every listener once it
	// stops.
	failed := make(chan error, 1)
	var listeners []net.Listener
	var accepting sync.WaitGroup
	start := func(l net.Listener) {
		listeners = append(listeners, l)
		accepting.Go(func() {
			err := srv.Serve(l)
			select {
			case failed <- fmt.Errorf("serve on %s: %w", l.Addr(), err):
			default:
			}
		})
	}
	e.ready.Store(true)
	start(ln)
	log.Info("serving", "address", ln.Addr().String(), "version", e.version)
	var releases <-chan chan<- answer
	if h != nil {
		adopted := h.releasePredecessor(ctx, log)
		for _, l := range adopted {
			start(l)
		}
		h.markServing(ctx, len(adopted), log)
		releases = h.releases
	}
	served := (<-chan error)(failed)
	released := false
	for {
		select {
		case err := <-served:
			return err
		case reply := <-releases:
			reply <- e.release(srv, listeners, &accepting, cfg, h, log)
			// Serve fails now, which is no failure; a second release finds
			// nothing left to stop or pass on.
			served, listeners, released = nil, nil, true
		case <-ctx.Done():
			if released {
				log.Info("stopped, released earlier", "cause", context.Cause(ctx).Error())
				return nil
			}
			return e.shutdown(ctx, srv, cfg, h, log)
		}
	}
}

// shutdown stops serving once ctx has ended, as the usage text says.
func (e *exporter) shutdown(ctx context.Context, srv *http.Server, cfg config, h *handoff, log *slog.Logger) error {
	start := e.now()
	e.notReady(h, log)
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

// notReady makes /ready report 503 and, in the handoff mode, removes the
// serving mark.
func (e *exporter) notReady(h *handoff, log *slog.Logger) {
	e.ready.Store(false)
	if h == nil {
		return
	}
	if err := os.Remove(h.servingFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Error("remove the serving mark", "file", h.servingFile, "err", err)
	}
}
