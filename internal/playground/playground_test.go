package playground_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/playground"
	"github.com/sidecarset/sidecarset/internal/scheme"
)

// syncBuffer is a bytes.Buffer safe to read while the playground writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
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

// TestPlaygroundWithDemo runs the playground as `make playground` does: it
// must come up, write a kubeconfig that works, tell the whole demo without
// a failed step, and on interrupt stop and remove the kubeconfig. It runs on
// two simulated nodes, or on a real node with SIDECARSET_NODES=real (as
// root).
func TestPlaygroundWithDemo(t *testing.T) {
	kind, nodes := playground.Simulated, 2
	if os.Getenv(fixture.NodesEnv) == string(fixture.Real) {
		kind, nodes = playground.Real, 1
	}
	kubeconfig := filepath.Join(t.TempDir(), "playground.kubeconfig")
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		// Guided: a line before each step after the first.
		done <- playground.Run(ctx, playground.Options{KubeConfig: kubeconfig, NodeKind: kind, Nodes: nodes, Demo: true,
			DemoPace: strings.NewReader(strings.Repeat("\n", 6)), Out: out})
	}()

	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			t.Fatalf("playground ended early: %v\n%s", err, out)
		default:
		}
		return strings.Contains(out.String(), "=== Demo done") || strings.Contains(out.String(), "The demo stopped"), nil
	})
	if err != nil {
		t.Fatalf("wait for the demo: %v\n%s", err, out)
	}
	text := out.String()
	if strings.Contains(text, "The demo stopped") {
		t.Fatalf("a demo step failed:\n%s", text)
	}
	if n := strings.Count(text, "[Enter: step "); n != 6 {
		t.Errorf("the guided demo asked %d times to go on, want 6 (before each step but the first)", n)
	}
	for _, want := range []string{
		// kubectl's own output.
		"namespace/demo created",
		"statefulset.apps/mysql created",
		"sidecarset.sidecarset.dev/mysql-exporter patched",
		"kubectl sidecarset rollout run mysql-exporter",
		"mysql-exporter: all 2 steps done",
		"demo/mysql-11",
		"SidecarSetUpgradable=False reason=UpdateImmutableField",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}

	// The kubeconfig reaches the playground's apiserver, as a user's kubectl would.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load the written kubeconfig: %v", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	var nodeList corev1.NodeList
	if err := c.List(t.Context(), &nodeList); err != nil || len(nodeList.Items) != nodes {
		t.Errorf("nodes through the kubeconfig: %d, %v; want %d", len(nodeList.Items), err, nodes)
	}
	set := &v1alpha1.SidecarSet{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: "mysql-exporter"}, set); err != nil || set.Status.NotUpgradablePods != 12 {
		t.Errorf("demo SidecarSet: %v, status %+v; want 12 not upgradable at the end", err, set.Status)
	}
	for _, p := range mustPods(t, c) {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "mysql" && s.RestartCount != 0 {
				t.Errorf("demo restarted the database container of %s", p.Name)
			}
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("playground stopped with %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("playground did not stop within 2 minutes of the interrupt")
	}
	if _, err := os.Stat(kubeconfig); !os.IsNotExist(err) {
		t.Errorf("kubeconfig left behind after stop: %v", err)
	}
}

func mustPods(t *testing.T, c client.Client) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(t.Context(), &pods, client.InNamespace("demo")); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 12 {
		t.Fatalf("demo has %d pods, want 12", len(pods.Items))
	}
	return pods.Items
}
