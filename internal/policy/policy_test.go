package policy

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

var db = map[string]string{"app": "db"}

func TestCompileUnsupported(t *testing.T) {
	port := func(name string, p int32) v1alpha1.SidecarContainer {
		c := testutil.Container(name, "img").Sidecar("")
		c.Ports = []corev1.ContainerPort{{ContainerPort: p}}
		return c
	}
	share := testutil.Container("log", "img").Sidecar("")
	share.ShareVolumePolicy = &v1alpha1.SharePolicy{Type: v1alpha1.SharePolicyEnabled}
	shareDevices := testutil.Container("dev", "img").RestartAlways().Sidecar("")
	shareDevices.ShareVolumeDevicePolicy = &v1alpha1.SharePolicy{Type: v1alpha1.SharePolicyEnabled}
	transfer := testutil.Container("env", "img").Sidecar("")
	transfer.TransferEnv = []v1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "A"}}
	sized := testutil.Container("sized", "img").RestartAlways().Sidecar("")
	sized.ResourcesPolicy = &v1alpha1.ResourcesPolicy{TargetContainersMode: v1alpha1.TargetContainersModeSum,
		ResourcesExpr: v1alpha1.ResourcesExpr{Requests: &v1alpha1.ResourceExpressions{CPU: "cpu / 10"}}}
	patched := func(policy v1alpha1.PatchPolicy) *v1alpha1.SidecarSet {
		s := testutil.SidecarSet("s").Selector(db).Container("x", "i").Obj()
		s.Spec.PatchPodMetadata = []v1alpha1.PatchPodMetadata{{PatchPolicy: policy, Annotations: map[string]string{"example.com/a": "1"}}}
		return s
	}
	pinned := testutil.SidecarSet("s").Selector(db).Container("x", "i").Obj()
	pinned.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{RevisionName: "s-old", Policy: v1alpha1.InjectRevisionAlways}
	tests := []struct {
		name string
		set  *v1alpha1.SidecarSet
		want string // in the reason
	}{
		{"name longer than 63", testutil.SidecarSet(strings.Repeat("a", 64)).Selector(db).Obj(), "not usable in an annotation key"},
		{"empty selector", testutil.SidecarSet("s").LabelSelector(&metav1.LabelSelector{}).Obj(), "spec.selector is empty"},
		{"invalid selector", testutil.SidecarSet("s").LabelSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: "Near", Values: []string{"db"}}}}).Obj(), "spec.selector"},
		{"a container declared twice", testutil.SidecarSet("s").Selector(db).Container("x", "i").Container("x", "j").Obj(), `container "x" twice`},
		{"an AfterAppContainer init container", testutil.SidecarSet("s").Selector(db).InitContainers(testutil.Container("w", "i").Sidecar(v1alpha1.AfterAppContainer)).Obj(), "AfterAppContainer"},
		{"own ports clash", testutil.SidecarSet("s").Selector(db).Containers(port("a", 80), port("b", 80)).Obj(), "clashing ports"},
		{"shareVolumePolicy", testutil.SidecarSet("s").Selector(db).Containers(share).Obj(), `container "log" uses shareVolumePolicy`},
		{"shareVolumeDevicePolicy on an init container", testutil.SidecarSet("s").Selector(db).InitContainers(shareDevices).Obj(), `container "dev" uses shareVolumeDevicePolicy`},
		{"transferEnv", testutil.SidecarSet("s").Selector(db).Containers(transfer).Obj(), `container "env" uses transferEnv`},
		{"HotUpgrade", testutil.SidecarSet("s").Selector(db).HotContainer("proxy", "proxy:1", "empty:1").Obj(), `container "proxy" is upgraded hot`},
		{"resourcesPolicy on a native sidecar", testutil.SidecarSet("s").Selector(db).InitContainers(sized).Obj(), `container "sized" uses resourcesPolicy`},
		{"a canary", testutil.SidecarSet("s").Selector(db).CanaryOf("base").Obj(), `a canary of SidecarSet "base"`},
		{"a base", testutil.SidecarSet("base").Selector(db).Obj(), "the base of the canary SidecarSet(s) s"},
		{"patchPodMetadata", patched(v1alpha1.PatchOverwrite), "spec.patchPodMetadata is written by the webhook"},
		{"patchPodMetadata with Retain", patched(v1alpha1.PatchRetain), "spec.patchPodMetadata is written by the webhook"},
		{"injectionStrategy.revision", pinned, "spec.injectionStrategy.revision names the revision new pods get"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts Options
			if tt.set.Name == "base" {
				opts.Canaries = []string{"s"}
			}
			_, err := Compile(tt.set, opts)
			var u *Unsupported
			if !errors.As(err, &u) {
				t.Fatalf("Compile error %v, want an *Unsupported", err)
			}
			if !strings.Contains(u.Reason, tt.want) {
				t.Errorf("reason %q, want it to say %q", u.Reason, tt.want)
			}
		})
	}
}

func TestCompile(t *testing.T) {
	set := testutil.SidecarSet("mesh").Selector(db).NamespaceSelector(map[string]string{"team": "data"}).
		Containers(testutil.Container("proxy", "proxy:1").VolumeMount("certs", "/certs").Sidecar("")).Obj()
	set.UID = "u1"
	got, err := Compile(set, Options{ManagerNamespace: "sidecarset-system"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Policy.Name != "sidecarset-mesh" || got.Binding.Name != "sidecarset-mesh" || got.Binding.Spec.PolicyName != "sidecarset-mesh" {
		t.Errorf("names %s, %s -> %s, want sidecarset-mesh for all", got.Policy.Name, got.Binding.Name, got.Binding.Spec.PolicyName)
	}
	for _, labels := range []map[string]string{got.Policy.Labels, got.Binding.Labels} {
		if diff := cmp.Diff(map[string]string{LabelSet: "mesh"}, labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
	}
	if want := revision.Name("mesh", &set.Spec); got.Revision != want {
		t.Errorf("revision %s, want %s", got.Revision, want)
	}
	wantNS := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name",
		Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-node-lease", "kube-public", "kube-system", "sidecarset-system"}}}}
	if diff := cmp.Diff(wantNS, got.Policy.Spec.MatchConstraints.NamespaceSelector); diff != "" {
		t.Errorf("policy namespaceSelector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(set.Spec.NamespaceSelector, got.Binding.Spec.MatchResources.NamespaceSelector); diff != "" {
		t.Errorf("binding namespaceSelector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(set.Spec.Selector, got.Binding.Spec.MatchResources.ObjectSelector); diff != "" {
		t.Errorf("binding objectSelector (-want +got):\n%s", diff)
	}
	if refs := got.Policy.OwnerReferences; len(refs) != 1 || refs[0].UID != "u1" || refs[0].Kind != "SidecarSet" {
		t.Errorf("owner references %+v, want the SidecarSet", refs)
	}
	var names []string
	for _, c := range got.Policy.Spec.MatchConditions {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"not-opted-out", "not-injected", "pod-size", "container-names-free", "volumes-declared"}, names); diff != "" {
		t.Errorf("matchConditions (-want +got):\n%s", diff)
	}

	set.Annotations = map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "true"}
	got, err = Compile(set, Options{ManagerNamespace: "sidecarset-system"})
	if err != nil {
		t.Fatal(err)
	}
	notIn := func(names ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name",
			Operator: metav1.LabelSelectorOpNotIn, Values: names}}}
	}
	// The annotation lifts the system namespaces, never the manager's.
	if diff := cmp.Diff(notIn("sidecarset-system"), got.Policy.Spec.MatchConstraints.NamespaceSelector); diff != "" {
		t.Errorf("with system namespaces allowed, policy namespaceSelector (-want +got):\n%s", diff)
	}
	// Nor those the installed webhook excludes.
	got, err = Compile(set, Options{ManagerNamespace: "sidecarset-system", Excluded: []string{"kube-system", "istio-system"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(notIn("istio-system", "kube-system", "sidecarset-system"), got.Policy.Spec.MatchConstraints.NamespaceSelector); diff != "" {
		t.Errorf("with system namespaces allowed and the webhook excluding some, policy namespaceSelector (-want +got):\n%s", diff)
	}
}

func TestLiteral(t *testing.T) {
	tests := []struct {
		name  string
		value any
		want  string
	}{
		{"fields, sorted", map[string]any{"name": "x", "port": 80, "on": true},
			`Object.spec.c{name: "x", on: true, port: 80}`},
		{"nested object named by its path", map[string]any{"env": []any{map[string]any{"name": "A", "value": "1"}}},
			`Object.spec.c{env: [Object.spec.c.env{name: "A", value: "1"}]}`},
		{"a map with keys that are not identifiers", map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1", "cpu": "1"}},
			`Object.spec.c{limits: {"cpu": "1", "nvidia.com/gpu": "1"}}`},
		{"a reserved word is a map key", map[string]any{"namespace": "x"}, `{"namespace": "x"}`},
		{"quotes escaped", map[string]any{"args": []any{`--q="a"`}}, `Object.spec.c{args: ["--q=\"a\""]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := literal("Object.spec.c", tt.value)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("literal = %s\nwant      %s", got, tt.want)
			}
		})
	}
	if _, err := literal("Object.spec.c", map[string]any{"a-b": "x", "c-d": 1}); !IsUnsupported(err) {
		t.Errorf("a map literal of mixed values: error %v, want an *Unsupported", err)
	}
}

// TestCompileJobPods: with jobPods NativeSidecar (the default) the mutation
// chooses by the pod's restartPolicy between the set's containers in place
// and the same containers as native sidecars with the record that says so;
// a set that keeps them regular, or has none, has one mutation for all pods.
func TestCompileJobPods(t *testing.T) {
	const branch = `object.spec.restartPolicy in ["Never", "OnFailure"]`
	set := testutil.SidecarSet("mesh").Selector(db).Container("proxy", "proxy:1").
		InitContainers(testutil.Container("mesh-init", "mesh:1").Sidecar("")).Obj()
	jobRecord := revision.EncodeSetState(revision.SetState{
		Revision: revision.Name("mesh", &set.Spec), Hash: revision.Hash(&set.Spec), ImagelessHash: revision.ImagelessHash(&set.Spec),
		Containers: []revision.ContainerState{{Name: "proxy", Init: true, Image: "proxy:1"}, {Name: "mesh-init", Init: true, Image: "mesh:1"}},
	})
	tests := []struct {
		name       string
		set        *v1alpha1.SidecarSet
		wantBranch bool
	}{
		{"NativeSidecar, the default", set, true},
		{"Keep", testutil.SidecarSet("mesh").Selector(db).JobPods(v1alpha1.JobPodsKeep).Container("proxy", "proxy:1").Obj(), false},
		{"no regular container", testutil.SidecarSet("mesh").Selector(db).InitContainers(testutil.Container("mesh-init", "mesh:1").RestartAlways().Sidecar("")).Obj(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Compile(tt.set, Options{})
			if err != nil {
				t.Fatal(err)
			}
			expr := got.Policy.Spec.Mutations[0].JSONPatch.Expression
			if strings.Contains(expr, branch) != tt.wantBranch {
				t.Errorf("mutation chooses by restartPolicy: %v, want %v\n%s", !tt.wantBranch, tt.wantBranch, expr)
			}
			var stale string
			for _, c := range got.Policy.Spec.MatchConditions {
				if c.Name == "not-injected" {
					stale = c.Expression
				}
			}
			if strings.Contains(stale, branch) != tt.wantBranch {
				t.Errorf("a stale record is judged by restartPolicy: %v, want %v\n%s", !tt.wantBranch, tt.wantBranch, stale)
			}
			if !tt.wantBranch {
				return
			}
			for _, want := range []string{
				`restartPolicy: "Always"`,
				strconv.Quote(jobRecord),
			} {
				if !strings.Contains(expr, want) {
					t.Errorf("mutation lacks %s:\n%s", want, expr)
				}
			}
		})
	}
}
