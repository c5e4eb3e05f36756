package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// adoptSet declares exporter (with a probe, a port, an env from a field and
// a memory limit, all of which the apiserver defaults) and the native sidecar
// shipper, with adoptionPolicy SameName.
func adoptSet(image string) *v1alpha1.SidecarSet {
	set := testSet(image)
	set.Spec.AdoptionPolicy = v1alpha1.AdoptSameName
	c := &set.Spec.Containers[0].Container
	c.Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9104}}
	c.Env = []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(9104)}}}
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	return set
}

// apiserverDefaulted returns c as the apiserver stores it in a pod, spelled
// out by hand rather than by the code under test.
func apiserverDefaulted(c corev1.Container, pullPolicy corev1.PullPolicy) corev1.Container {
	c = *c.DeepCopy()
	c.ImagePullPolicy = pullPolicy
	c.TerminationMessagePath = "/dev/termination-log"
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	for i := range c.Ports {
		c.Ports[i].Protocol = corev1.ProtocolTCP
	}
	for i := range c.Env {
		if c.Env[i].ValueFrom != nil && c.Env[i].ValueFrom.FieldRef != nil {
			c.Env[i].ValueFrom.FieldRef.APIVersion = "v1"
		}
	}
	if p := c.ReadinessProbe; p != nil {
		p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold = 1, 10, 1, 3
		p.HTTPGet.Path, p.HTTPGet.Scheme = "/", corev1.URISchemeHTTP
	}
	if c.Resources.Limits != nil && c.Resources.Requests == nil {
		c.Resources.Requests = c.Resources.Limits.DeepCopy()
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{
		Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
	return c
}

// preexisting returns a pod created before set with the same sidecars at
// image, as the apiserver stored it, without any record.
func preexisting(set *v1alpha1.SidecarSet, image string) *corev1.Pod {
	exporter := set.Spec.Containers[0].Container
	exporter.Image = image
	shipper := set.Spec.InitContainers[0].Container
	return testutil.Pod(testNS, "legacy-0").Labels(map[string]string{"app": "db"}).
		Containers(apiserverDefaulted(corev1.Container{Name: "mysql", Image: "mysql:8"}, corev1.PullIfNotPresent),
			apiserverDefaulted(exporter, corev1.PullIfNotPresent)).
		InitContainers(apiserverDefaulted(shipper, corev1.PullIfNotPresent)).
		Obj()
}

func TestAdoptable(t *testing.T) {
	tests := []struct {
		name string
		set  func() *v1alpha1.SidecarSet
		pod  func(set *v1alpha1.SidecarSet) *corev1.Pod
		want bool
	}{
		{
			name: "same sidecars, older image, apiserver defaults and token mount",
			pod:  func(set *v1alpha1.SidecarSet) *corev1.Pod { return preexisting(set, "exporter:v1") },
			want: true,
		},
		{
			name: "same image too",
			pod:  func(set *v1alpha1.SidecarSet) *corev1.Pod { return preexisting(set, "exporter:v2") },
			want: true,
		},
		{
			name: "pod runs :latest, so its pull policy defaulted to Always",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:latest")
				pod.Spec.Containers[1].ImagePullPolicy = corev1.PullAlways
				return pod
			},
			want: true,
		},
		{
			name: "pull policy differs from the default for the pod's image",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Spec.Containers[1].ImagePullPolicy = corev1.PullAlways
				return pod
			},
			want: false,
		},
		{
			name: "set already defaulted by its webhook",
			set: func() *v1alpha1.SidecarSet {
				set := adoptSet("exporter:v2")
				c := &set.Spec.Containers[0].Container
				c.ImagePullPolicy = corev1.PullIfNotPresent
				c.TerminationMessagePath = "/dev/termination-log"
				return set
			},
			pod:  func(set *v1alpha1.SidecarSet) *corev1.Pod { return preexisting(set, "exporter:v1") },
			want: true,
		},
		{
			name: "hostNetwork pod: host ports equal container ports",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Spec.HostNetwork = true
				pod.Spec.Containers[1].Ports[0].HostPort = 9104
				return pod
			},
			want: true,
		},
		{
			name: "an env var differs",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Spec.Containers[1].Env = append(pod.Spec.Containers[1].Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
				return pod
			},
			want: false,
		},
		{
			name: "a LimitRange added a cpu request",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Spec.Containers[1].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100m")
				return pod
			},
			want: false,
		},
		{
			name: "the native sidecar is missing",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Spec.InitContainers = nil
				return pod
			},
			want: false,
		},
		{
			name: "the native sidecar is a regular container in the pod",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Spec.Containers = append(pod.Spec.Containers, pod.Spec.InitContainers...)
				pod.Spec.InitContainers = nil
				return pod
			},
			want: false,
		},
		{
			name: "adoptionPolicy Never",
			set: func() *v1alpha1.SidecarSet {
				set := adoptSet("exporter:v2")
				set.Spec.AdoptionPolicy = v1alpha1.AdoptNever
				return set
			},
			pod:  func(set *v1alpha1.SidecarSet) *corev1.Pod { return preexisting(set, "exporter:v1") },
			want: false,
		},
		{
			name: "pod opted out of injection",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Annotations = map[string]string{v1alpha1.AnnotationInject: "false"}
				return pod
			},
			want: false,
		},
		{
			name: "already carries this set's record",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				setRecord(pod, AdoptionRecord(pod, set))
				return pod
			},
			want: false,
		},
		{
			name: "another set's record claims a container of that name",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Annotations = map[string]string{v1alpha1.AnnotationState: revision.Encode(revision.State{"other": {
					Revision: "other-1", Hash: "h", ImagelessHash: "i",
					Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:v1"}}}})}
				return pod
			},
			want: false,
		},
		{
			name: "records of other sets for other containers do not matter",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Annotations = map[string]string{v1alpha1.AnnotationState: revision.Encode(revision.State{"other": {
					Revision: "other-1", Hash: "h", ImagelessHash: "i",
					Containers: []revision.ContainerState{{Name: "envoy", Image: "envoy:1"}}}})}
				return pod
			},
			want: true,
		},
		{
			name: "state annotation cannot be decoded",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Annotations = map[string]string{v1alpha1.AnnotationState: "{not json"}
				return pod
			},
			want: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := adoptSet("exporter:v2")
			if tt.set != nil {
				set = tt.set()
			}
			pod := tt.pod(set)
			podBefore, setBefore := pod.DeepCopy(), set.DeepCopy()
			if got := Adoptable(pod, set); got != tt.want {
				t.Errorf("Adoptable = %v, want %v", got, tt.want)
			}
			if diff := cmp.Diff(podBefore, pod); diff != "" {
				t.Errorf("Adoptable modified the pod (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(setBefore, set); diff != "" {
				t.Errorf("Adoptable modified the set (-before +after):\n%s", diff)
			}
		})
	}
}

// An adopted pod joins the rollout as any other: not updated when its image
// is older, updated when it is the declared one, upgradable either way.
func TestAdoptionRecord(t *testing.T) {
	set := adoptSet("exporter:v2")
	latest := NewLatest(set)
	tests := []struct {
		image string
		want  verdict
	}{
		{"exporter:v1", verdict{Upgradable: true, PodReady: true, Ready: true}},
		{"exporter:v2", verdict{Updated: true, Upgradable: true, PodReady: true, Ready: true}},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			pod := preexisting(set, tt.image)
			for _, c := range pod.Spec.Containers {
				pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, running(c.Name, c.Image))
			}
			for _, c := range pod.Spec.InitContainers {
				pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, running(c.Name, c.Image))
			}
			setReady(pod, true)

			rec := AdoptionRecord(pod, set)
			wantContainers := []revision.ContainerState{
				{Name: "exporter", Image: tt.image},
				{Name: "shipper", Init: true, Image: "fluent-bit:3.1"},
			}
			if diff := cmp.Diff(wantContainers, rec.Containers); diff != "" {
				t.Errorf("record containers (-want +got):\n%s", diff)
			}
			if rec.ImagelessHash != latest.ImagelessHash || rec.Revision != setName+"-"+rec.Hash {
				t.Errorf("record %+v, want imageless hash %s and revision named after its hash", rec, latest.ImagelessHash)
			}
			if diff := cmp.Diff(tt.want, verdictOf(Classify(pod, rec, latest))); diff != "" {
				t.Errorf("classified after adoption (-want +got):\n%s", diff)
			}
		})
	}
}
