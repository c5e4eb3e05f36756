package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// runMainEnv makes the test binary run main instead of the tests, so that
// TestSIGTERM can signal a real exporter process.
const runMainEnv = "EXPORTER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	versionFile := filepath.Join(dir, "version")
	if err := os.WriteFile(versionFile, []byte("v7\nanything after the first line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	defaults := config{listen: ":9104", version: "v7", shutdownTimeout: 10 * time.Second, servingFile: "/tmp/serving"}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    config
		wantErr string
	}{
		{name: "version from the file", args: []string{"-version-file", versionFile}, want: defaults},
		{
			name: "flags win over the environment and the file",
			args: []string{"-version-file", versionFile, "-listen", "127.0.0.1:1", "-version", "v9", "-shutdown-delay", "2s", "-shutdown-timeout", "3s"},
			env:  map[string]string{"EXPORTER_LISTEN": ":2", "EXPORTER_VERSION": "v8"},
			want: config{listen: "127.0.0.1:1", version: "v9", shutdownDelay: 2 * time.Second, shutdownTimeout: 3 * time.Second, servingFile: "/tmp/serving"},
		},
		{
			name: "the environment wins over the file",
			args: []string{"-version-file", versionFile},
			env:  map[string]string{"EXPORTER_LISTEN": ":2", "EXPORTER_VERSION": "v8"},
			want: config{listen: ":2", version: "v8", shutdownTimeout: 10 * time.Second, servingFile: "/tmp/serving"},
		},
		{name: "no file needed with a version", args: []string{"-version-file", missing, "-version", "v1"}, want: config{listen: ":9104", version: "v1", shutdownTimeout: 10 * time.Second, servingFile: "/tmp/serving"}},
		{
			name: "handoff from the environment",
			args: []string{"-version-file", versionFile},
			env:  map[string]string{"EXPORTER_HANDOFF_DIR": "/handoff", "EXPORTER_SERVING_FILE": "/run/serving"},
			want: config{listen: ":9104", version: "v7", shutdownTimeout: 10 * time.Second, handoffDir: "/handoff", servingFile: "/run/serving"},
		},
		{
			name: "handoff flags win over the environment",
			args: []string{"-version-file", versionFile, "-handoff-dir", "/shared", "-serving-file", "/serving"},
			env:  map[string]string{"EXPORTER_HANDOFF_DIR": "/handoff", "EXPORTER_SERVING_FILE": "/run/serving"},
			want: config{listen: ":9104", version: "v7", shutdownTimeout: 10 * time.Second, handoffDir: "/shared", servingFile: "/serving"},
		},
		{name: "no version at all", args: []string{"-version-file", missing}, wantErr: "no version: give -version, set EXPORTER_VERSION or provide " + missing},
		{name: "empty version file", args: []string{"-version-file", empty}, wantErr: "no version: " + empty + " is empty"},
		{name: "arguments", args: []string{"-version", "v1", "serve"}, wantErr: `unexpected arguments ["serve"]`},
		{name: "zero timeout", args: []string{"-version", "v1", "-shutdown-timeout", "0s"}, wantErr: "-shutdown-timeout must be positive"},
		{name: "unknown flag", args: []string{"-port", "1"}, wantErr: "flag provided but not defined: -port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseConfig(%q) = %+v, %v; want an error containing %q", tc.args, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(config{})); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHandlers reads each path as Prometheus and the kubelet would, and the
// metrics back in the text format.
func TestHandlers(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := start
	e := newExporter("v3", func() time.Time { return now })
	srv := httptest.NewServer(e.handler())
	defer srv.Close()

	if code, body := get(t, srv.URL+"/ready"); code != http.StatusServiceUnavailable || body != "shutting down\n" {
		t.Errorf("/ready before serving = %d %q, want 503", code, body)
	}
	e.ready.Store(true)
	if code, body := get(t, srv.URL+"/ready"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/ready while serving = %d %q, want 200 \"ok\\n\"", code, body)
	}
	if code, body := get(t, srv.URL+"/version"); code != http.StatusOK || body != "v3\n" {
		t.Errorf("/version = %d %q, want 200 \"v3\\n\"", code, body)
	}
	if code, _ := get(t, srv.URL+"/nothing"); code != http.StatusNotFound {
		t.Errorf("/nothing = %d, want 404", code)
	}
	now = start.Add(90 * time.Second)
	code, body := get(t, srv.URL+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d %q", code, body)
	}
	families := parseMetrics(t, body)
	want := map[string]float64{
		`sidecarset_test_exporter_info{version="v3"}`:                                1,
		`sidecarset_test_exporter_uptime_seconds`:                                    90,
		`sidecarset_test_exporter_http_requests_total{code="200",handler="ready"}`:   1,
		`sidecarset_test_exporter_http_requests_total{code="503",handler="ready"}`:   1,
		`sidecarset_test_exporter_http_requests_total{code="200",handler="version"}`: 1,
	}
	if diff := cmp.Diff(want, families); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	// The first scrape is counted once it is answered.
	_, body = get(t, srv.URL+"/metrics")
	if got := parseMetrics(t, body)[`sidecarset_test_exporter_http_requests_total{code="200",handler="metrics"}`]; got != 1 {
		t.Errorf("second scrape counts %v scrapes before it, want 1", got)
	}
}

// blockingCollector holds a scrape until it is released, as a slow
// exporter would.
type blockingCollector struct {
	desc    *prometheus.Desc
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlockingCollector() *blockingCollector {
	return &blockingCollector{
		desc:    prometheus.NewDesc("slow_metric", "A metric whose collection waits.", nil, nil),
		entered: make(chan struct{}),
		release: make(chan struct{}),
	}
}

func (b *blockingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

func (b *blockingCollector) Collect(ch chan<- prometheus.Metric) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
	ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, 1)
}

// started serves e on a loopback port until ctx ends; the returned channel
// yields serve's result.
func started(ctx context.Context, t *testing.T, e *exporter, cfg config, log io.Writer) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.serve(ctx, ln, cfg, nil, slog.New(slog.NewTextHandler(log, nil))) }()
	return "http://" + ln.Addr().String(), done
}

// TestShutdownFinishesInFlight cancels the exporter's context while a
// scrape is in flight: the exporter stops accepting connections at once,
// answers the scrape in full once it can, and only then returns, with nil
// and one log line.
func TestShutdownFinishesInFlight(t *testing.T) {
	e := newExporter("v1", time.Now)
	slow := newBlockingCollector()
	e.registry.MustRegister(slow)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log syncBuffer
	url, done := started(ctx, t, e, config{shutdownTimeout: 10 * time.Second}, &log)

	type result struct {
		code int
		body string
		err  error
	}
	scraped := make(chan result, 1)
	go func() {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			scraped <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		scraped <- result{resp.StatusCode, string(body), err}
	}()
	<-slow.entered
	cancel()

	// Shutdown closes the listener first: new connections are refused
	// while the scrape is still held.
	addr := strings.TrimPrefix(url, "http://")
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the exporter still accepts connections 5s after its context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("serve returned %v with a scrape in flight", err)
	case <-time.After(200 * time.Millisecond):
	}

	close(slow.release)
	r := <-scraped
	if r.err != nil || r.code != http.StatusOK || !strings.Contains(r.body, "slow_metric 1") {
		t.Errorf("the scrape in flight got %d, %v:\n%s\nwant 200 with slow_metric", r.code, r.err, r.body)
	}
	if err := <-done; err != nil {
		t.Errorf("serve after a graceful shutdown = %v, want nil", err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "msg=serving") || !strings.Contains(lines[1], `msg="stopped serving, requests in flight finished" cause="context canceled"`) {
		t.Errorf("log = %q, want a serving line and one stopped line", lines)
	}
}

// TestShutdownTimeout: a scrape that outlasts -shutdown-timeout makes serve
// fail, so that the exporter exits non-zero.
func TestShutdownTimeout(t *testing.T) {
	e := newExporter("v1", time.Now)
	slow := newBlockingCollector()
	defer close(slow.release)
	e.registry.MustRegister(slow)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, done := started(ctx, t, e, config{shutdownTimeout: 100 * time.Millisecond}, io.Discard)
	go func() {
		if resp, err := http.Get(url + "/metrics"); err == nil {
			resp.Body.Close()
		}
	}()
	<-slow.entered
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "requests still in flight 100ms after context canceled") {
			t.Errorf("serve = %v, want the shutdown timeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not return 5s after a 100ms shutdown timeout")
	}
}

// TestShutdownDelay: during -shutdown-delay the exporter still serves, and
// reports 503 on /ready.
func TestShutdownDelay(t *testing.T) {
	e := newExporter("v1", time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, done := started(ctx, t, e, config{shutdownDelay: 500 * time.Millisecond, shutdownTimeout: time.Second}, io.Discard)
	waitReady(t, url)
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := get(t, url+"/ready")
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ready = %d 5s after the context ended, want 503", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body := get(t, url+"/version"); code != http.StatusOK || body != "v1\n" {
		t.Errorf("/version during the shutdown delay = %d %q, want 200", code, body)
	}
	if err := <-done; err != nil {
		t.Errorf("serve = %v, want nil", err)
	}
}

// TestSIGTERM runs main in a process of its own and signals it: it exits 0
// and logs one line about stopping.
func TestSIGTERM(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-listen", "127.0.0.1:0", "-version", "v5")
	// Outside the handoff mode there is no serving mark.
	mark := filepath.Join(t.TempDir(), "serving")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "EXPORTER_SERVING_FILE="+mark)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Only a test that fails before the exporter exits needs this; after
	// the exit, Kill reports the process done, which is no failure.
	defer func() { _ = cmd.Process.Kill() }()
	lines := bufio.NewScanner(stderr)
	if !lines.Scan() {
		t.Fatalf("the exporter logged nothing: %v", lines.Err())
	}
	m := regexp.MustCompile(`msg=serving address=(\S+) version=v5`).FindStringSubmatch(lines.Text())
	if m == nil {
		t.Fatalf("first log line %q does not say where it serves", lines.Text())
	}
	url := "http://" + m[1]
	waitReady(t, url)
	if exists(mark) {
		t.Errorf("the exporter made the serving mark %s outside the handoff mode", mark)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the exporter exited with %v after SIGTERM, want 0", err)
	}
	if len(rest) != 1 || !strings.Contains(rest[0], `cause="terminated signal received"`) {
		t.Errorf("log after SIGTERM = %q, want one line naming the signal", rest)
	}
}

func TestEnvVersion(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
		warns bool
	}{
		{value: "", want: 0},
		{value: "0", want: 0},
		{value: "3", want: 3},
		{value: "12", want: 12},
		{value: "v2", warns: true},
		{value: "-1", warns: true},
		{value: " 2", warns: true},
		{value: "1.5", warns: true},
	} {
		var log strings.Builder
		getenv := func(k string) string {
			if k == altVersionEnv {
				return tc.value
			}
			return "9"
		}
		got := envVersion(getenv, altVersionEnv, slog.New(slog.NewTextHandler(&log, nil)))
		if got != tc.want {
			t.Errorf("envVersion(%q) = %d, want %d", tc.value, got, tc.want)
		}
		if warned := strings.Contains(log.String(), "level=WARN"); warned != tc.warns {
			t.Errorf("envVersion(%q) logged %q, want a warning: %v", tc.value, log.String(), tc.warns)
		}
	}
}

// TestHandoff hands the port from version 1 to version 2 while one client
// polls /version on new connections and another on a connection kept
// alive: no request fails, every request after the takeover reaches
// version 2, and version 1 stays, idle, until it is stopped.
func TestHandoff(t *testing.T) {
	dir := t.TempDir()
	addr := freePort(t)
	oldSock, newSock := filepath.Join(dir, "exporter-1.sock"), filepath.Join(dir, "exporter-2.sock")
	old := startHandoff(t, dir, addr, "v1", 1, 0)
	waitFor(t, "v1 serving", func() bool { return exists(old.mark) })
	if got := askControl(t, oldSock, "stop\n"); !strings.HasPrefix(got, "error: ") {
		t.Errorf("v1 answered %q to an unknown request, want an error", got)
	}

	var (
		mu       sync.Mutex
		answers  = map[string]int{} // by phase:client:version
		failures []string
		tookOver atomic.Bool
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	count := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		return answers[key]
	}
	poll := func(name string, client *http.Client) {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			phase := "before:"
			if tookOver.Load() {
				phase = "after:"
			}
			code, body, err := getVia(client, "http://"+addr+"/version")
			mu.Lock()
			switch {
			case err != nil:
				failures = append(failures, fmt.Sprintf("%s: %v", name, err))
			case code != http.StatusOK:
				failures = append(failures, fmt.Sprintf("%s: %d %q", name, code, body))
			default:
				answers[phase+name+":"+strings.TrimSpace(body)]++
			}
			mu.Unlock()
		}
	}
	clients := map[string]*http.Client{
		"new":  {Transport: &http.Transport{DisableKeepAlives: true}},
		"kept": {Transport: &http.Transport{}},
	}
	for name, c := range clients {
		wg.Go(func() { poll(name, c) })
	}
	defer func() {
		// Stopped already unless the test failed early.
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	waitFor(t, "both clients answered by v1", func() bool { return count("before:new:v1") > 0 && count("before:kept:v1") > 0 })

	succ := startHandoff(t, dir, addr, "v2", 2, 1)
	waitFor(t, "v2 serving", func() bool { return exists(succ.mark) })
	tookOver.Store(true)
	if exists(old.mark) {
		t.Errorf("v1's serving mark %s is still there after the takeover", old.mark)
	}
	waitFor(t, "both clients answered by v2 after the takeover", func() bool { return count("after:new:v2") >= 20 && count("after:kept:v2") >= 20 })
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d requests failed during the handoff, want none: %q", len(failures), failures)
	}
	for key, n := range answers {
		if strings.HasPrefix(key, "after:") && !strings.HasSuffix(key, ":v2") {
			t.Errorf("%d requests after the takeover answered %s, want v2 only", n, key)
		}
	}
	succ.waitLog(t, `msg="took over" version=2 predecessor=1 sockets=1`)

	select {
	case <-old.done:
		t.Fatalf("v1 exited on release with %v, want it idle until stopped", old.err)
	case <-time.After(50 * time.Millisecond):
	}
	// Idle, it answers a second release at once: a successor that restarts
	// asks again.
	if got := askControl(t, oldSock, "release\n"); got != "released\n" {
		t.Errorf("idle v1 answered %q to a second release, want \"released\"", got)
	}
	old.stop(t)
	if exists(oldSock) {
		t.Errorf("v1 left its control socket %s", oldSock)
	}
	if code, body := get(t, "http://"+addr+"/version"); code != http.StatusOK || body != "v2\n" {
		t.Errorf("/version once v1 exited = %d %q, want v2", code, body)
	}
	succ.stop(t)
	if exists(succ.mark) || exists(newSock) {
		t.Errorf("v2 left its serving mark or its control socket: %v, %v", exists(succ.mark), exists(newSock))
	}
}

// TestHandoffPassesEverySocket: the second upgrade passes on the socket of
// the first exporter too, and the last one accepts on all three.
func TestHandoffPassesEverySocket(t *testing.T) {
	dir := t.TempDir()
	addr := freePort(t)
	var last *handoffRun
	for v := 1; v <= 3; v++ {
		last = startHandoff(t, dir, addr, fmt.Sprintf("v%d", v), v, v-1)
		waitFor(t, fmt.Sprintf("v%d serving", v), func() bool { return exists(last.mark) })
	}
	last.waitLog(t, `msg="took over" version=3 predecessor=2 sockets=2`)
	// The kernel spreads new connections over the three sockets: one that
	// nobody accepted on would leave some unanswered.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for range 30 {
		if code, body, err := getVia(client, "http://"+addr+"/version"); err != nil || code != http.StatusOK || body != "v3\n" {
			t.Fatalf("/version = %d %q, %v; want v3", code, body, err)
		}
	}
}

// TestSuccessorWithoutPredecessor: a successor whose predecessor is gone
// serves all the same.
func TestSuccessorWithoutPredecessor(t *testing.T) {
	addr := freePort(t)
	in := startHandoff(t, t.TempDir(), addr, "v3", 3, 2)
	waitFor(t, "v3 serving", func() bool { return exists(in.mark) })
	if code, body := get(t, "http://"+addr+"/version"); code != http.StatusOK || body != "v3\n" {
		t.Errorf("/version = %d %q, want v3", code, body)
	}
	in.waitLog(t, `msg="the predecessor did not release" predecessor=2`)
	in.waitLog(t, `msg="took over" version=3 predecessor=2 sockets=0`)
	in.stop(t)
}

// TestOlderVersionIdles: an exporter older than the other container's
// does not listen, and exits 0 when stopped.
func TestOlderVersionIdles(t *testing.T) {
	dir := t.TempDir()
	addr := freePort(t)
	in := startHandoff(t, dir, addr, "v1", 1, 2)
	in.waitLog(t, `msg="not serving: the other container runs a newer version" version=1 other=2`)
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s accepts connections, want nobody listening", addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("connect to %s: %v, want connection refused", addr, err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 || exists(in.mark) {
		t.Errorf("handoff dir holds %v (%v), serving mark: %v; want neither a control socket nor a mark", entries, err, exists(in.mark))
	}
	select {
	case <-in.done:
		t.Fatalf("the exporter exited with %v before it was stopped", in.err)
	case <-time.After(50 * time.Millisecond):
	}
	in.stop(t)
}

// handoffRun is an exporter run in the handoff mode in-process.
type handoffRun struct {
	mark   string
	log    *syncBuffer
	cancel context.CancelFunc
	done   chan struct{} // closed once run returned err
	err    error
}

// startHandoff runs an exporter of the given version, with SIDECARSET_VERSION
// v and SIDECARSET_VERSION_ALT a, on addr; its serving mark is in a
// directory of its own, as in a container of its own.
func startHandoff(t *testing.T, dir, addr, version string, v, a int) *handoffRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &handoffRun{mark: filepath.Join(t.TempDir(), "serving"), log: &syncBuffer{}, cancel: cancel, done: make(chan struct{})}
	cfg := config{listen: addr, version: version, shutdownTimeout: 10 * time.Second, handoffDir: dir, servingFile: r.mark}
	env := map[string]string{versionEnv: strconv.Itoa(v), altVersionEnv: strconv.Itoa(a)}
	go func() {
		defer close(r.done)
		r.err = run(ctx, cfg, func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(r.log, nil)))
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
		if t.Failed() {
			t.Logf("log of %s:\n%s", version, r.log)
		}
	})
	return r
}

// stop cancels the run, which must return nil.
func (r *handoffRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		t.Fatal("the exporter did not return 15s after it was stopped")
	}
	if r.err != nil {
		t.Errorf("run = %v, want nil", r.err)
	}
}

// waitLog waits for a log line that contains s; the serving mark may come
// before the line that follows it.
func (r *handoffRun) waitLog(t *testing.T, s string) {
	t.Helper()
	waitFor(t, "log line with "+s, func() bool { return strings.Contains(r.log.String(), s) })
}

// askControl sends req to the control socket at path and returns the
// answer line.
func askControl(t *testing.T, path, req string) string {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(15 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	answer, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read the answer to %q: %v", req, err)
	}
	return answer
}

// freePort returns a loopback address nobody listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 5s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func waitReady(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if code, _ := get(t, url+"/ready"); code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/ready not 200 within 5s", url)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// get returns the status code and body, or code 0 when the request failed.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// getVia is get for another goroutine than the test's, with client.
func getVia(client *http.Client, url string) (int, string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// parseMetrics parses the text format and returns each sample's value by
// name{labels}.
func parseMetrics(t *testing.T, text string) map[string]float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("metrics are not in the text format: %v\n%s", err, text)
	}
	got := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			key := name
			if len(m.GetLabel()) > 0 {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				key += "{" + strings.Join(labels, ",") + "}"
			}
			got[key] = value(m)
		}
	}
	return got
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return 0
}

// syncBuffer is a log the serving goroutine writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
