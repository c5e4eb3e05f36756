package cli_test

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// TestInjectFromCluster injects the cluster's SidecarSets into a manifest,
// then creates the printed Deployment: its pods must carry the sidecar once
// (the webhook sees the record and does not inject again) and count as the
// SidecarSet's matched pods.
func TestInjectFromCluster(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	// Let the webhook's cache see the set before pods are created below.
	f.WaitStatus("a first status", func(v1alpha1.SidecarSetStatus) bool { return true })

	configMap := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings   # kept as written\ndata: {a: b}"
	input := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {example.com/db: %[1]s}
  template:
    metadata:
      labels: {example.com/db: %[1]s}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: app
        image: mysql:8.4
---
%[2]s
`, f.NS, configMap)
	r := execute(t, false, input, "inject", "-f", "-", "-n", f.NS)
	if r.err != nil {
		t.Fatal(r.err)
	}
	docs := strings.Split(r.out, "---\n")
	if len(docs) != 2 || strings.TrimSpace(docs[1]) != configMap {
		t.Fatalf("want the Deployment and the ConfigMap exactly as written, got:\n%s", r.out)
	}
	mustContain(t, r.errOut, `Warning: Deployment web: SidecarSet "`+f.Set+`" container "exporter" image "exporter:v1" is a tag`)

	deploy := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), deploy); err != nil {
		t.Fatalf("printed Deployment: %v", err)
	}
	if got := containerNames(deploy.Spec.Template.Spec.Containers); got != "exporter,app" {
		t.Fatalf("template containers %s, want exporter,app", got)
	}
	f.Create(deploy)
	f.WaitPods("2 ready pods", func(pods []corev1.Pod) bool {
		ready := 0
		for _, p := range pods {
			if fixture.PodReady(&p) {
				ready++
			}
		}
		return ready == 2
	})
	for _, p := range f.Pods() {
		if got := containerNames(p.Spec.Containers); got != "exporter,app" {
			t.Errorf("pod %s has containers %s, want exporter,app: injected twice?", p.Name, got)
		}
		state, err := revision.Decode(p.Annotations)
		if err != nil || state[f.Set].Revision == "" {
			t.Errorf("pod %s lacks the record of %s: %v", p.Name, f.Set, err)
		}
	}
	f.complete(2)
}

func containerNames(cs []corev1.Container) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return strings.Join(names, ",")
}
