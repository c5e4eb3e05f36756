package rollout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/adopt"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// TestClassifyResourcesPolicy: sidecars whose resources a resourcesPolicy
// computed at injection (a regular one and a native one) differ in the pod
// from the set's declaration, but upgradability is judged on the set's
// revisions, so a new image stays in place; a change of the policy itself
// is a change beyond the image: the resources a policy computed belong to the
// pod, so only fixed resources are resized in place.
// SameName adoption does not compare the computed resources either.
func TestClassifyResourcesPolicy(t *testing.T) {
	sized := func(image, cpu string) *v1alpha1.SidecarSet {
		set := testSet(image)
		for _, sc := range []*v1alpha1.SidecarContainer{&set.Spec.Containers[0], &set.Spec.InitContainers[0]} {
			sc.ResourcesPolicy = &v1alpha1.ResourcesPolicy{
				TargetContainersMode:      v1alpha1.TargetContainersModeSum,
				TargetContainersNameRegex: ".*",
				ResourcesExpr:             v1alpha1.ResourcesExpr{Requests: &v1alpha1.ResourceExpressions{CPU: cpu}},
			}
		}
		return set
	}
	v1 := sized("exporter:v1", "cpu / 10")
	app := testutil.Container("mysql", "mysql:8").Requests("2", "1Gi").Obj()
	pod := testutil.Pod(testNS, "p01").Labels(map[string]string{"app": "db"}).Containers(app).Obj()
	res := inject.Inject(pod, nil, []*v1alpha1.SidecarSet{v1}, inject.Options{})
	if len(res.Injected) != 1 {
		t.Fatalf("not injected: %v", res.Warnings)
	}
	pod = res.Pod
	for _, cs := range [][]corev1.Container{pod.Spec.Containers[:1], pod.Spec.InitContainers} {
		if got := cs[0].Resources.Requests.Cpu().String(); got != "200m" {
			t.Fatalf("%s requests cpu %s, want 200m", cs[0].Name, got)
		}
	}

	if p := Classify(pod, record(pod), NewLatest(sized("exporter:v2", "cpu / 10"))); !p.Upgradable {
		t.Errorf("a new image over a sidecar with computed resources is not upgradable")
	}
	if p := Classify(pod, record(pod), NewLatest(sized("exporter:v2", "cpu / 5"))); p.Upgradable {
		t.Errorf("a new resourcesPolicy is upgradable in place; the resources of a running pod stay as injected")
	}

	adopting := sized("exporter:v1", "cpu / 10")
	adopting.Spec.AdoptionPolicy = v1alpha1.AdoptSameName
	unrecorded := pod.DeepCopy()
	unrecorded.Annotations = nil
	if !adopt.Adoptable(unrecorded, adopting) {
		t.Errorf("a pod with the sidecars and their computed resources is not adoptable")
	}
}
