package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sidecarset/sidecarset/internal/bench"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

// startControlPlane starts a kube-apiserver and etcd with the manager's
// webhooks registered under failurePolicy (the webhooks' own when empty),
// and stops them once b and its deferred calls are done.
func startControlPlane(b *testing.B, failurePolicy admissionregistrationv1.FailurePolicyType) *testenv.Env {
	b.Helper()
	testenv.SetLogger()
	hooks, err := testenv.WebhookOptions(failurePolicy)
	if err != nil {
		b.Fatal(err)
	}
	env, err := testenv.Start(testenv.Options{Webhooks: hooks})
	if err != nil {
		b.Fatalf("start the control plane: %v", err)
	}
	b.Cleanup(func() {
		if err := env.Stop(); err != nil {
			b.Error(err)
		}
	})
	return env
}

// fastClient returns a clientset for creating the benchmark's pods:
// protobuf, no client-side rate limit (a negative QPS turns it off: the
// offered rate is the benchmark's to set), warnings not printed.
func fastClient(cfg *rest.Config) (*kubernetes.Clientset, error) {
	fast := rest.CopyConfig(cfg)
	fast.QPS, fast.Burst = -1, 0
	fast.ContentType = "application/vnd.kubernetes.protobuf"
	fast.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	fast.WarningHandler = rest.NoWarnings{}
	return kubernetes.NewForConfig(fast)
}

// createNamespaces creates the namespaces names.
func createNamespaces(ctx context.Context, cs kubernetes.Interface, names ...string) error {
	for _, ns := range names {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	return nil
}

// removeManagerFiles closes the managers' log, removes it unless b failed
// (it is kept to read why) and removes the manager binary built for b.
func removeManagerFiles(b *testing.B, log *os.File) {
	if err := log.Close(); err == nil && !b.Failed() {
		_ = os.Remove(log.Name())
	}
	if err := testenv.RemoveManagerBinary(); err != nil {
		b.Error(err)
	}
}

// results is what a benchmark writes under bench/results: NAME.json (the
// report), NAME.md, other files such as charts, and its keys of
// summary.json, with the scale it ran at.
type results struct {
	name     string
	report   any
	markdown []byte
	files    map[string][]byte
	summary  map[string]any
	scale    string
}

func writeResults(r results) error {
	if err := os.MkdirAll(resultsDir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r.report, "", "  ")
	if err != nil {
		return err
	}
	errs := []error{
		os.WriteFile(filepath.Join(resultsDir, r.name+".json"), append(data, '\n'), 0o644),
		os.WriteFile(filepath.Join(resultsDir, r.name+".md"), r.markdown, 0o644),
	}
	for file, content := range r.files {
		errs = append(errs, os.WriteFile(filepath.Join(resultsDir, file), content, 0o644))
	}
	r.summary["scale"] = r.scale
	errs = append(errs, bench.MergeSummary(filepath.Join(resultsDir, "summary.json"), r.summary))
	return errors.Join(errs...)
}
