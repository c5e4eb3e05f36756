package inject

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

func resList(kv ...string) corev1.ResourceList {
	if len(kv) == 0 {
		return nil
	}
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// TestPolicyResources: the worked cases of resources.go, and each reason a
// policy gives no resources.
func TestPolicyResources(t *testing.T) {
	app := testutil.Container("app", "app:1").Requests("1", "1Gi").Limits("2", "1Gi").Obj()
	worker := testutil.Container("worker", "worker:1").Requests("500m", "512Mi").Obj()
	limitsOnly := testutil.Container("lim", "lim:1").Limits("300m", "256Mi").Obj()
	bare := testutil.Container("bare", "bare:1").Obj()
	exact := testutil.Container("app", "app:1").Requests("1", "1Gi").Limits("1", "1Gi").Obj()
	policy := func(mode v1alpha1.TargetContainersMode, regex string, limits, requests *v1alpha1.ResourceExpressions) *v1alpha1.ResourcesPolicy {
		return &v1alpha1.ResourcesPolicy{TargetContainersMode: mode, TargetContainersNameRegex: regex,
			ResourcesExpr: v1alpha1.ResourcesExpr{Limits: limits, Requests: requests}}
	}
	cpu := func(e string) *v1alpha1.ResourceExpressions { return &v1alpha1.ResourceExpressions{CPU: e} }
	mem := func(e string) *v1alpha1.ResourceExpressions { return &v1alpha1.ResourceExpressions{Memory: e} }
	keep := func(p *v1alpha1.ResourcesPolicy) *v1alpha1.ResourcesPolicy { p.KeepQoSClass = true; return p }
	sum, maxMode := v1alpha1.TargetContainersModeSum, v1alpha1.TargetContainersModeMax
	tests := []struct {
		name       string
		policy     *v1alpha1.ResourcesPolicy
		own        []corev1.Container
		guaranteed bool
		want       corev1.ResourceRequirements
		err        string
	}{
		{name: "sum of requests", policy: policy(sum, ".*", nil, cpu("cpu * 10%")), own: []corev1.Container{app, worker},
			want: corev1.ResourceRequirements{Requests: resList("cpu", "150m")}},
		{name: "max of requests", policy: policy(maxMode, ".*", nil, mem("memory / 4")), own: []corev1.Container{app, worker},
			want: corev1.ResourceRequirements{Requests: resList("memory", "256Mi")}},
		{name: "an unlimited target leaves the limit unset", policy: policy(sum, ".*", cpu("cpu"), nil), own: []corev1.Container{app, worker}},
		{name: "the regex picks the targets", policy: policy(maxMode, "^app$", cpu("cpu / 2"), nil), own: []corev1.Container{app, worker},
			want: corev1.ResourceRequirements{Limits: resList("cpu", "1")}},
		{name: "a missing request counts with the limit", policy: policy(sum, ".*", nil, &v1alpha1.ResourceExpressions{CPU: "cpu", Memory: "memory"}),
			own:  []corev1.Container{limitsOnly, bare},
			want: corev1.ResourceRequirements{Requests: resList("cpu", "300m", "memory", "256Mi")}},
		{name: "no request and no limit count as 0", policy: policy(sum, ".*", nil, cpu("max(cpu, 50m)")), own: []corev1.Container{bare},
			want: corev1.ResourceRequirements{Requests: resList("cpu", "50m")}},
		{name: "limits and requests", policy: policy(sum, "app|worker", mem("memory * 2"), mem("memory / 2")), own: []corev1.Container{app, limitsOnly},
			want: corev1.ResourceRequirements{Limits: resList("memory", "2Gi"), Requests: resList("memory", "512Mi")}},
		{name: "keepQoSClass in a Guaranteed pod",
			policy:     keep(policy(sum, ".*", cpu("cpu * 20%"), &v1alpha1.ResourceExpressions{CPU: "cpu * 10%", Memory: "memory / 8"})),
			own:        []corev1.Container{exact},
			guaranteed: true,
			want:       corev1.ResourceRequirements{Limits: resList("cpu", "200m", "memory", "128Mi"), Requests: resList("cpu", "200m", "memory", "128Mi")}},
		{name: "keepQoSClass in a Burstable pod changes nothing",
			policy: keep(policy(sum, ".*", cpu("cpu * 20%"), &v1alpha1.ResourceExpressions{CPU: "cpu * 10%", Memory: "memory / 8"})),
			own:    []corev1.Container{exact},
			want:   corev1.ResourceRequirements{Limits: resList("cpu", "200m"), Requests: resList("cpu", "100m", "memory", "128Mi")}},
		{name: "no target", policy: policy(sum, "^db$", cpu("cpu"), nil), own: []corev1.Container{app},
			err: `no container of the pod matches targetContainersNameRegex "^db$"`},
		{name: "a negative result", policy: policy(sum, ".*", nil, cpu("cpu - 2")), own: []corev1.Container{app},
			err: `resourcesExpr.requests.cpu "cpu - 2": the result -1.000 is negative`},
		{name: "a request above the limit", policy: policy(sum, ".*", cpu("cpu / 4"), cpu("cpu")), own: []corev1.Container{exact},
			err: "the cpu request computed, 1, is above the limit computed, 250m, which the apiserver refuses"},
		{name: "keepQoSClass with a 0", policy: keep(policy(sum, ".*", nil, &v1alpha1.ResourceExpressions{CPU: "cpu * 0", Memory: "memory"})),
			own: []corev1.Container{exact}, guaranteed: true,
			err: "keepQoSClass: the pod is Guaranteed and the sidecar's cpu computed is 0, which would make it Burstable"},
		{name: "keepQoSClass without a memory expression", policy: keep(policy(sum, ".*", cpu("cpu"), nil)),
			own: []corev1.Container{exact}, guaranteed: true,
			err: "keepQoSClass: the pod is Guaranteed and no memory expression gives the sidecar a memory limit"},
		{name: "an invalid regex", policy: policy(sum, "(", cpu("cpu"), nil), own: []corev1.Container{app},
			err: `targetContainersNameRegex "(": error parsing regexp`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			own := make([]*corev1.Container, len(tt.own))
			for i := range tt.own {
				own[i] = &tt.own[i]
			}
			got, err := policyResources(tt.policy, own, tt.guaranteed)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOwnContainers: the pod's regular containers and native sidecars are
// candidates; plain init containers and what a set injected are not.
func TestOwnContainers(t *testing.T) {
	set := testutil.SidecarSet("mesh").Container("proxy", "proxy:1").
		InitContainers(testutil.Container("mesh-init", "mesh:1").RestartAlways().Sidecar("")).Obj()
	res := Inject(testutil.Pod("ns", "p").Containers(testutil.Container("app", "app:1").Obj()).Obj(), nil, []*v1alpha1.SidecarSet{set}, Options{})
	pod := res.Pod
	pod.Spec.InitContainers = append(pod.Spec.InitContainers,
		testutil.Container("setup", "setup:1").Obj(),
		testutil.Container("own-native", "log:1").RestartAlways().Obj())
	state, err := revision.Decode(pod.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range ownContainers(pod, state) {
		got = append(got, c.Name)
	}
	if diff := cmp.Diff([]string{"own-native", "app"}, got); diff != "" {
		t.Errorf("own containers (-want +got):\n%s", diff)
	}
}
