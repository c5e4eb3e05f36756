package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sidecarset/sidecarset/internal/testutil"
)

func TestContainersQOS(t *testing.T) {
	c := testutil.Container
	tests := []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{name: "no containers", pod: testutil.Pod("ns", "p").Obj(), want: corev1.PodQOSBestEffort},
		{name: "no resources", pod: testutil.Pod("ns", "p").Container("a", "i").Container("b", "i").Obj(), want: corev1.PodQOSBestEffort},
		{name: "requests equal limits", pod: testutil.Pod("ns", "p").Containers(c("a", "i").Requests("1", "1Gi").Limits("1", "1Gi").Obj()).Obj(), want: corev1.PodQOSGuaranteed},
		{name: "equal quantities written differently", pod: testutil.Pod("ns", "p").Containers(c("a", "i").Requests("1000m", "1024Mi").Limits("1", "1Gi").Obj()).Obj(), want: corev1.PodQOSGuaranteed},
		{name: "limits only: requests default to them", pod: testutil.Pod("ns", "p").Containers(c("a", "i").Limits("1", "1Gi").Obj()).Obj(), want: corev1.PodQOSGuaranteed},
		{name: "requests only", pod: testutil.Pod("ns", "p").Containers(c("a", "i").Requests("1", "1Gi").Obj()).Obj(), want: corev1.PodQOSBurstable},
		{name: "requests below limits", pod: testutil.Pod("ns", "p").Containers(c("a", "i").Requests("500m", "1Gi").Limits("1", "1Gi").Obj()).Obj(), want: corev1.PodQOSBurstable},
		{name: "cpu without memory", pod: testutil.Pod("ns", "p").Containers(c("a", "i").Requests("1", "").Limits("1", "").Obj()).Obj(), want: corev1.PodQOSBurstable},
		{name: "a Guaranteed and a BestEffort container", pod: testutil.Pod("ns", "p").Containers(c("a", "i").Limits("1", "1Gi").Obj(), c("b", "i").Obj()).Obj(), want: corev1.PodQOSBurstable},
		{name: "init containers count", pod: testutil.Pod("ns", "p").Containers(c("a", "i").Limits("1", "1Gi").Obj()).InitContainers(c("init", "i").Obj()).Obj(), want: corev1.PodQOSBurstable},
		{
			name: "resources other than cpu and memory do not count",
			pod: testutil.Pod("ns", "p").Containers(corev1.Container{Name: "a", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
			}}).Obj(),
			want: corev1.PodQOSBestEffort,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := containersQOS(tc.pod); got != tc.want {
				t.Errorf("containersQOS() = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPodLevelResourcesSet(t *testing.T) {
	list := func(name corev1.ResourceName) corev1.ResourceList {
		return corev1.ResourceList{name: resource.MustParse("1")}
	}
	tests := []struct {
		name      string
		resources *corev1.ResourceRequirements
		want      bool
	}{
		{name: "none", resources: nil},
		{name: "empty", resources: &corev1.ResourceRequirements{}},
		{name: "cpu request", resources: &corev1.ResourceRequirements{Requests: list(corev1.ResourceCPU)}, want: true},
		{name: "memory limit", resources: &corev1.ResourceRequirements{Limits: list(corev1.ResourceMemory)}, want: true},
		{name: "hugepages limit", resources: &corev1.ResourceRequirements{Limits: list("hugepages-2Mi")}, want: true},
		{name: "ephemeral storage only", resources: &corev1.ResourceRequirements{Limits: list(corev1.ResourceEphemeralStorage)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := testutil.Pod("ns", "p").Obj()
			pod.Spec.Resources = tc.resources
			if got := podLevelResourcesSet(pod); got != tc.want {
				t.Errorf("podLevelResourcesSet() = %t, want %t", got, tc.want)
			}
		})
	}
}
