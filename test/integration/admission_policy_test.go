package integration

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// TestImageRewrittenByPolicy: a MutatingAdmissionPolicy that rewrites the
// injected sidecar's image, on pod creation and update, as digest-pinning
// policies and registry mirrors do. The pods are not drifted: the webhook,
// reinvoked after the policy, records the image the apiserver stores, and
// driftPolicy Revert writes nothing back. Before, every pod was drifted from
// birth, and Revert and the policy rewrote it for ever. A new revision that
// changes another sidecar writes exporter:v1 too, which the policy stores
// as the image the pod has: exporter is not restarted, and the rollout
// completes (it waited for exporter's restart until it stalled).
func TestImageRewrittenByPolicy(t *testing.T) {
	digest, err := cluster.Digest("exporter:v1")
	if err != nil {
		t.Fatal(err)
	}
	pinned := "exporter:v1@" + digest
	tests := []struct {
		name string
		// rewrite is a CEL expression of the container c's new image, for
		// containers whose image is exporter:v1.
		rewrite string
		want    string
	}{
		{"pinned to its digest", fmt.Sprintf("c.image + %q", pinned[len("exporter:v1"):]), pinned},
		{"moved to a mirror by tag", `"mirror.example/" + c.image`, "mirror.example/exporter:v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const pods = 3
			f := newFixture(t)
			f.imagePolicy(tt.rewrite, tt.want)
			set := f.SidecarSet("exporter:v1", 0)
			set.Spec.DriftPolicy = v1alpha1.DriftRevert
			set.Spec.Containers = append(set.Spec.Containers, v1alpha1.SidecarContainer{
				Container: corev1.Container{Name: "shipper", Image: "shipper:v1"}})
			f.CreateSet(set)
			f.waitInjecting("exporter")
			f.CreatePods(pods, nil, nil)
			f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
				return s.MatchedPods == pods && s.UpdatedReadyPods == pods
			})

			if n := f.countPodWrites(quiet); n != 0 {
				t.Errorf("%d pod writes in %v once all were ready, want none", n, quiet)
			}
			if st := f.GetSet().Status; st.DriftedPods != 0 {
				t.Errorf("driftedPods %d, want 0", st.DriftedPods)
			}
			for _, p := range f.Pods() {
				if got := fixture.Image(&p, "exporter"); got != tt.want {
					t.Errorf("pod %s exporter image %s, want %s as the policy rewrote it", p.Name, got, tt.want)
				}
				state, err := revision.Decode(p.Annotations)
				if err != nil {
					t.Fatalf("pod %s: %v", p.Name, err)
				}
				if rc, _ := state[f.Set].Container("exporter"); rc.Image != tt.want {
					t.Errorf("pod %s records exporter image %s, want %s as stored", p.Name, rc.Image, tt.want)
				}
				if c := fixture.PodCondition(&p, controller.PodConditionDrifted); c != nil && c.Status == corev1.ConditionTrue {
					t.Errorf("pod %s: %s=True: %s", p.Name, controller.PodConditionDrifted, c.Message)
				}
			}
			if got := f.PodEvents(controller.ReasonDriftReverted); len(got) != 0 {
				t.Errorf("%s events %v, want none", controller.ReasonDriftReverted, got)
			}
			f.AssertNothingRestarted()

			f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[1].Image = "shipper:v2" })
			f.WaitStatus("complete on shipper:v2", func(s v1alpha1.SidecarSetStatus) bool {
				return fixture.Condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue &&
					s.UpdatedPods == pods && s.UpdatedReadyPods == pods
			})
			for _, p := range f.Pods() {
				if got := fixture.Image(&p, "exporter"); got != tt.want {
					t.Errorf("pod %s exporter image %s after the update, want %s", p.Name, got, tt.want)
				}
			}
			for pod, n := range fixture.Restarts(f.Pods(), "exporter") {
				if n != 0 {
					t.Errorf("pod %s: exporter restarted %d times by an update of shipper", pod, n)
				}
			}
		})
	}
}

// TestWriteRewrittenByPolicy: a MutatingAdmissionPolicy, added once the
// pods run, moves exporter:v1 to a mirror by tag on update, as Kyverno's
// replace-registry does. A write of exporter:v1 by the controller (the
// revert of a hand edit, or an update to a revision that declares it) is
// stored as the mirror's image: the controller records what was stored,
// writes the pod no more, and says so once on the set. Before, the record
// kept exporter:v1, the pod was drifted, and driftPolicy Revert wrote it
// again at once, for ever, with a DriftReverted event each time.
func TestWriteRewrittenByPolicy(t *testing.T) {
	const (
		pods   = 2
		mirror = "mirror.example/exporter:v1"
	)
	tests := []struct {
		name string
		// from is the image the set declares when the pods are created.
		from string
		// write makes the controller write exporter:v1 into some pods.
		write func(f *testFixture)
		// rewritten are the pods written, each told once on the set.
		rewritten map[string]int
		// restarts bound the exporter restarts each pod ends with, from
		// the first to the second.
		restarts map[string][2]int32
		reverts  map[string]int
	}{
		{
			name: "a hand edit reverted",
			from: "exporter:v1",
			write: func(f *testFixture) {
				patch := []byte(`{"spec":{"containers":[{"name":"exporter","image":"exporter:hand"}]}}`)
				if err := env.Client.Patch(f.T.Context(), f.Pod("p02"), fixture.RawStrategic(patch)); err != nil {
					f.T.Fatal(err)
				}
				f.WaitPodEvent("p02", controller.ReasonDriftReverted)
			},
			rewritten: map[string]int{"p02": 1},
			// Two restarts, for the hand edit and the revert, or one from a
			// kubelet that acts on both specs at once: the controller reverts
			// on sight, without waiting for the kubelet to run the hand edit.
			restarts: map[string][2]int32{"p01": {0, 0}, "p02": {1, 2}},
			reverts:  map[string]int{"p02": 1},
		},
		{
			name: "an update",
			from: "exporter:v2",
			write: func(f *testFixture) {
				f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v1" })
			},
			rewritten: map[string]int{"p01": 1, "p02": 1},
			restarts:  map[string][2]int32{"p01": {1, 1}, "p02": {1, 1}},
			reverts:   map[string]int{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			set := f.SidecarSet(tt.from, 0)
			set.Spec.DriftPolicy = v1alpha1.DriftRevert
			f.CreateSet(set)
			f.CreatePods(pods, nil, nil)
			f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
				return s.MatchedPods == pods && s.UpdatedReadyPods == pods
			})
			f.imagePolicy(`"mirror.example/" + c.image`, mirror)

			tt.write(f)
			// Not f.WaitPods: the counts below tell how far from settled
			// the pods stay.
			settled := func(context.Context) (bool, error) {
				st := f.GetSet().Status
				if st.DriftedPods != 0 || st.UpdatedReadyPods != pods || fixture.Condition(st, v1alpha1.ConditionComplete) != metav1.ConditionTrue {
					return false, nil
				}
				for _, p := range f.Pods() {
					state, err := revision.Decode(p.Annotations)
					if err != nil {
						return false, err
					}
					rc, _ := state[f.Set].Container("exporter")
					c := fixture.PodCondition(&p, controller.PodConditionDrifted)
					if tt.rewritten[p.Name] > 0 && (fixture.Image(&p, "exporter") != mirror || rc.Image != mirror) ||
						c != nil && c.Status == corev1.ConditionTrue {
						return false, nil
					}
				}
				return true, nil
			}
			if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, settled); err != nil {
				t.Errorf("pods not settled with %s stored and recorded: %v\n%s", mirror, err, f.Describe())
			}

			if n := f.countPodWrites(quiet); n != 0 {
				t.Errorf("%d pod writes in %v after the policy's rewrite, want none", n, quiet)
			}
			if got := f.PodEvents(controller.ReasonDriftReverted); !maps.Equal(got, tt.reverts) {
				t.Errorf("%s events per pod %v, want %v", controller.ReasonDriftReverted, got, tt.reverts)
			}
			if got := f.SetEventPods(controller.ReasonImageRewritten); !maps.Equal(got, tt.rewritten) {
				t.Errorf("%s events on the set per pod %v, want %v", controller.ReasonImageRewritten, got, tt.rewritten)
			}
			if c := fixture.SetCondition(f.GetSet().Status, v1alpha1.ConditionComplete); c == nil ||
				!strings.Contains(c.Message, fmt.Sprintf("%d run sidecar images admission rewrote", len(tt.rewritten))) {
				t.Errorf("condition Complete %+v does not tell the %d pod(s) admission rewrote", c, len(tt.rewritten))
			}
			got := fixture.Restarts(f.Pods(), "exporter")
			for pod, want := range tt.restarts {
				if n, ok := got[pod]; !ok || n < want[0] || n > want[1] {
					t.Errorf("pod %s: %d exporter restarts, want %d to %d (all: %v)", pod, n, want[0], want[1], got)
				}
			}
		})
	}
}

// imagePolicy installs, for the fixture's namespace, a MutatingAdmissionPolicy
// that sets every container whose image is exporter:v1 to the CEL
// expression rewrite (of c), on create and update, and waits until the
// apiserver applies it (to want).
func (f *testFixture) imagePolicy(rewrite, want string) {
	f.T.Helper()
	name := f.NS + "-images"
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
						},
					},
				}},
			},
			// No matchConditions: a policy skipped on the first pass, before
			// the sidecar is injected, is not run on the reinvocation either.
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{spec: Object.spec{
					containers: object.spec.containers.filter(c, c.image == "exporter:v1").map(c,
						Object.spec.containers{name: c.name, image: ` + rewrite + `})}}`},
			}},
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy,
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: f.NS}},
			},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := env.Client.Create(f.T.Context(), obj); err != nil {
			f.T.Fatalf("create %T: %v", obj, err)
		}
		f.T.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
	// The apiserver learns of policies through its informers: probe with
	// a pod that no SidecarSet selects, created in dry-run.
	err := wait.PollUntilContextTimeout(f.T.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		probe := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.NS, Name: "policy-probe"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "exporter", Image: "exporter:v1"}}},
		}
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, err
		}
		return probe.Spec.Containers[0].Image == want, nil
	})
	if err != nil {
		f.T.Fatalf("wait for the MutatingAdmissionPolicy to apply: %v", err)
	}
}

// waitInjecting waits until the webhook injects containers into the
// fixture's pods (its cache has seen the SidecarSets that declare them),
// probing with a pod created in dry-run.
func (f *testFixture) waitInjecting(containers ...string) {
	f.T.Helper()
	err := wait.PollUntilContextTimeout(f.T.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		probe := f.NewPod("injection-probe")
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, err
		}
		for _, c := range containers {
			if fixture.Image(probe, c) == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		f.T.Fatalf("wait for the webhook to inject %v: %v", containers, err)
	}
}
