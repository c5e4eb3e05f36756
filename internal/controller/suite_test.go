package controller_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/internal/testenv"
)

// env is a real apiserver shared by the package's tests; each test works in
// namespaces of its own.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.SetLogger()
	var err error
	if env, err = testenv.Start(testenv.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "start the control plane:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the control plane:", err)
	}
	os.Exit(code)
}

// requests counts the pod requests that go through a client, by kind:
// "GET pod", "PATCH pod", "LIST pods". It can also fail or hold requests.
type requests struct {
	mu     sync.Mutex
	counts map[string]int
	// fail, when set, answers a request it returns true for with a 500.
	fail func(*http.Request) bool
	// hold, when set, returns a channel the request waits on.
	hold func(*http.Request) <-chan struct{}
}

func newRequests() *requests { return &requests{counts: map[string]int{}} }

// config returns a copy of cfg whose requests r sees.
func (r *requests) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			r.mu.Lock()
			r.counts[podRequest(req)]++
			fail, hold := r.fail, r.hold
			r.mu.Unlock()
			if hold != nil {
				if ch := hold(req); ch != nil {
					select {
					case <-ch:
					case <-req.Context().Done():
						return nil, req.Context().Err()
					}
				}
			}
			if fail != nil && fail(req) {
				body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected failure","reason":"InternalError","code":500}`
				return &http.Response{StatusCode: http.StatusInternalServerError, Request: req,
					Header: http.Header{"Content-Type": []string{"application/json"}},
					Body:   io.NopCloser(strings.NewReader(body))}, nil
			}
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

func (r *requests) set(fail func(*http.Request) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = fail
}

// take returns the counts so far and starts again from zero.
func (r *requests) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.counts {
		if k != "" {
			out[k] = v
		}
	}
	r.counts = map[string]int{}
	return out
}

// podRequest names a request to pods: "GET pod", "LIST pods", ...; empty
// for anything else.
func podRequest(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// api/v1/pods, api/v1/namespaces/NS/pods[/NAME[/status]]
	if len(parts) < 3 || parts[0] != "api" {
		return ""
	}
	rest := parts[2:]
	if rest[0] == "namespaces" && len(rest) >= 3 {
		rest = rest[2:]
	}
	if rest[0] != "pods" {
		return ""
	}
	switch {
	case len(rest) == 1 && req.URL.Query().Get("watch") == "true":
		return "WATCH pods"
	case len(rest) == 1 && req.Method == http.MethodGet:
		return "LIST pods"
	case len(rest) == 1:
		return req.Method + " pods"
	}
	return req.Method + " pod"
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// directClient reads and writes the apiserver itself, through cfg.
func directClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "controller-"}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// recorder keeps the events the controller emits.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := ""
	if o, ok := regarding.(client.Object); ok {
		name = o.GetName()
	}
	r.events = append(r.events, fmt.Sprintf("%s %s %s: %s", eventtype, reason, name, fmt.Sprintf(note, args...)))
}
