package integration

import (
	"context"
	"fmt"
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
// birth, and Revert and the policy rewrote it for ever.
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
