package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// The set's own warning, which the validating webhook gave when the set
	// was created, once.
	tag := `Warning: SidecarSet ` + f.Set + `: spec.containers[0].image: image "exporter:v1" of container "exporter" is a tag`
	mustContain(t, r.errOut, tag)
	if n := strings.Count(r.errOut, tag); n != 1 {
		t.Errorf("the set's warning printed %d times, want once:\n%s", n, r.errOut)
	}

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

// TestInjectMatchesWebhook: offline inject gives what the webhook gives
// (a server-side dry-run create through the apiserver) for the same pods:
// a Namespace inside a List gives its labels to a namespaceSelector, and a
// namespace the webhook never sees (kube-system, by the chart's default) is
// not injected, even by a SidecarSet allowed into system namespaces.
func TestInjectMatchesWebhook(t *testing.T) {
	f := newFixture(t)
	ns := &corev1.Namespace{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: f.NS}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels["example.com/tier"] = "gold"
	if err := env.Client.Update(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	gold := f.SidecarSet("exporter:v1", 0)
	gold.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/tier": "gold"}}
	f.CreateSet(gold)
	system := f.SidecarSet("proxy:v1", 0)
	system.Name = f.Set + "-system"
	system.Annotations = map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "true"}
	system.Spec.Containers[0].Name = "proxy"
	f.CreateSet(system)

	// The SidecarSets as stored, for offline use.
	var sets []any
	for _, name := range []string{gold.Name, system.Name} {
		s := &v1alpha1.SidecarSet{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, s); err != nil {
			t.Fatal(err)
		}
		s.APIVersion, s.Kind = v1alpha1.GroupVersion.String(), "SidecarSet"
		s.ManagedFields, s.Status = nil, v1alpha1.SidecarSetStatus{}
		sets = append(sets, s)
	}
	setsFile := filepath.Join(t.TempDir(), "sidecarsets.yaml")
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": sets})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(setsFile, b, 0o600); err != nil {
		t.Fatal(err)
	}

	pod := func(namespace string) *corev1.Pod {
		p := f.NewPod("web")
		p.Namespace = namespace
		p.APIVersion, p.Kind = "v1", "Pod"
		f.C.FitPod(&p.Spec)
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string // containers the webhook gives
	}{
		{"labelled namespace", pod(f.NS), "exporter,proxy," + fixture.AppContainer},
		{"excluded namespace", pod(metav1.NamespaceSystem), fixture.AppContainer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			webhook := tc.pod.DeepCopy()
			if err := env.Client.Create(t.Context(), webhook, client.DryRunAll); err != nil {
				t.Fatal(err)
			}
			if got := containerNames(webhook.Spec.Containers); got != tc.want {
				t.Fatalf("webhook: containers %s, want %s", got, tc.want)
			}
			// The namespace's labels travel inside a List, as kubectl get
			// -o yaml prints them.
			nsDoc := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": f.NS, "labels": ns.Labels}}
			input, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{nsDoc, tc.pod}})
			if err != nil {
				t.Fatal(err)
			}
			r := offline(t, string(input), "inject", "-f", "-", "--sidecarsets", setsFile)
			if r.err != nil {
				t.Fatalf("inject: %v\n%s", r.err, r.errOut)
			}
			var list struct {
				Items []corev1.Pod `json:"items"`
			}
			if err := yaml.Unmarshal([]byte(r.out), &list); err != nil || len(list.Items) != 2 {
				t.Fatalf("inject printed %d items (%v):\n%s", len(list.Items), err, r.out)
			}
			got := list.Items[1]
			if diff := cmp.Diff(containerNames(webhook.Spec.Containers), containerNames(got.Spec.Containers)); diff != "" {
				t.Errorf("containers, webhook (-) vs offline inject (+):\n%s", diff)
			}
			for _, key := range []string{v1alpha1.AnnotationInjected, v1alpha1.AnnotationState} {
				if diff := cmp.Diff(webhook.Annotations[key], got.Annotations[key]); diff != "" {
					t.Errorf("annotation %s, webhook (-) vs offline inject (+):\n%s", key, diff)
				}
			}
		})
	}
}

// TestInjectNamespaceless: a Pod without a namespace takes -n, else the
// kubeconfig context's namespace (saying so), else is refused; never a
// silent "default".
func TestInjectNamespaceless(t *testing.T) {
	sets := filepath.Join("testdata", "inject", "sidecarsets.yaml")
	bare := "apiVersion: v1\nkind: Pod\nmetadata: {name: web-1, labels: {app: web}}\nspec:\n  containers: [{name: app, image: web:2.0}]\n"
	r := offline(t, bare, "inject", "-f", "-", "--sidecarsets", sets)
	if r.err == nil || !strings.Contains(r.err.Error(), "Pod web-1: no metadata.namespace, no -n, and the kubeconfig context sets none") {
		t.Errorf("no namespace anywhere: %v", r.err)
	}
	withContext := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(withContext, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: shop, context: {cluster: c, user: u, namespace: shop}}]
current-context: shop
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = offline(t, bare, "inject", "-f", "-", "--sidecarsets", sets, "--kubeconfig", withContext)
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, r.errOut, "Warning: Pod web-1: no metadata.namespace: injected as in namespace shop, the kubeconfig context's")
	r2 := offline(t, bare, "inject", "-f", "-", "--sidecarsets", sets, "-n", "shop")
	if r2.err != nil || r2.out != r.out {
		t.Errorf("-n shop and the context's namespace shop differ (%v):\n%s\n---\n%s", r2.err, r2.out, r.out)
	}
}

// TestInjectUnreadable: a document whose apiVersion does not parse, and a
// workload whose pod template is not an object, come out as they went in,
// each with a warning saying why.
func TestInjectUnreadable(t *testing.T) {
	sets := filepath.Join("testdata", "inject", "sidecarsets.yaml")
	in := `apiVersion: a/b/c
kind: Pod
metadata: {name: web-1, namespace: shop, labels: {app: web}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec: {template: broken}
`
	r := offline(t, in, "inject", "-f", "-", "--sidecarsets", sets)
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, r.errOut,
		"unexpected GroupVersion string: a/b/c; printed as it came",
		"pod template at spec.template: ",
	)
	mustContain(t, r.out, "apiVersion: a/b/c", "template: broken")
	if strings.Contains(r.out, "log-shipper") {
		t.Errorf("something was injected:\n%s", r.out)
	}
}
