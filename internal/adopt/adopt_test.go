package adopt

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

const (
	setName = "mysql-sidecars"
	testNS  = "db"
)

// testSet declares exporter on image and the native sidecar shipper.
func testSet(image string) *v1alpha1.SidecarSet {
	return testutil.SidecarSet(setName).
		Selector(map[string]string{"app": "db"}).
		Container("exporter", image).
		InitContainers(testutil.Container("shipper", "fluent-bit:3.1").RestartAlways().Sidecar("")).
		MinReadySeconds(0).
		Obj()
}

// running is the status of a container running image, ready.
func running(name, image string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:        name,
		Image:       image,
		ImageID:     "registry.example/sidecar@sha256:" + strings.Repeat("a", 64),
		ContainerID: "containerd://" + name + "-0",
		Ready:       true,
		State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}
}

func setReady(pod *corev1.Pod) {
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
}

func setRecord(pod *corev1.Pod, rec revision.SetState) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[v1alpha1.AnnotationState] = revision.Encode(revision.State{setName: rec})
}

// verdict is what rollout.Classify says of a pod, in brief.
type verdict struct {
	Updated, Updating, Upgradable, PodReady, Ready bool
	Drifted                                        []string
}

func verdictOf(p rollout.Pod) verdict {
	return verdict{p.Updated, p.Updating, p.Upgradable, p.PodReady, p.Ready, p.Drifted}
}

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

// preexistingJob returns a Job's pod created before set, as injection with
// jobPods NativeSidecar would have built it: exporter a native sidecar after
// shipper.
func preexistingJob(set *v1alpha1.SidecarSet, image string) *corev1.Pod {
	pod := preexisting(set, image)
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	exporter := pod.Spec.Containers[1]
	exporter.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, exporter)
	return pod
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
			name: "a Job's pod with the regular sidecar as a native one (jobPods NativeSidecar)",
			pod:  func(set *v1alpha1.SidecarSet) *corev1.Pod { return preexistingJob(set, "exporter:v1") },
			want: true,
		},
		{
			name: "a Job's pod with the regular sidecar still regular: not where NativeSidecar puts it",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				return pod
			},
			want: false,
		},
		{
			name: "a Job's pod with the regular sidecar still regular, jobPods Keep",
			set: func() *v1alpha1.SidecarSet {
				set := adoptSet("exporter:v2")
				set.Spec.JobPods = v1alpha1.JobPodsKeep
				return set
			},
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexisting(set, "exporter:v1")
				pod.Spec.RestartPolicy = corev1.RestartPolicyNever
				return pod
			},
			want: true,
		},
		{
			name: "a Job's pod with the sidecar in the init containers but not restarting: not the declared sidecar",
			pod: func(set *v1alpha1.SidecarSet) *corev1.Pod {
				pod := preexistingJob(set, "exporter:v1")
				pod.Spec.InitContainers[1].RestartPolicy = nil
				return pod
			},
			want: false,
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
	latest := rollout.NewLatest(set)
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
			checkAdoptionRecord(t, set, pod, latest, tt.want, []revision.ContainerState{
				{Name: "exporter", Image: tt.image},
				{Name: "shipper", Init: true, Image: "fluent-bit:3.1"},
			})
		})
		// A Job's pod records the regular sidecar where it runs, in the
		// init containers, and is classified as any other.
		t.Run(tt.image+" in a Job's pod", func(t *testing.T) {
			pod := preexistingJob(set, tt.image)
			checkAdoptionRecord(t, set, pod, latest, tt.want, []revision.ContainerState{
				{Name: "exporter", Init: true, Image: tt.image},
				{Name: "shipper", Init: true, Image: "fluent-bit:3.1"},
			})
		})
	}
}

// checkAdoptionRecord adopts pod, running and ready, into set and checks
// the record and how the pod is classified then.
func checkAdoptionRecord(t *testing.T, set *v1alpha1.SidecarSet, pod *corev1.Pod, latest rollout.Latest, want verdict, wantContainers []revision.ContainerState) {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, running(c.Name, c.Image))
	}
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, running(c.Name, c.Image))
	}
	setReady(pod)

	rec := AdoptionRecord(pod, set)
	if diff := cmp.Diff(wantContainers, rec.Containers); diff != "" {
		t.Errorf("record containers (-want +got):\n%s", diff)
	}
	if rec.ImagelessHash != latest.ImagelessHash || rec.Revision != setName+"-"+rec.Hash {
		t.Errorf("record %+v, want imageless hash %s and revision named after its hash", rec, latest.ImagelessHash)
	}
	if diff := cmp.Diff(want, verdictOf(rollout.Classify(pod, rec, latest))); diff != "" {
		t.Errorf("classified after adoption (-want +got):\n%s", diff)
	}
}

// kruiseInjected returns a pod as OpenKruise's webhook would have injected
// set into it (before the apiserver's defaults, which preexisting applies):
// the app container mysql with an env var and a data volume mount, each
// sidecar with IS_INJECTED=true appended to its declared env, and the pod
// annotations Kruise writes on every injection. change edits the sidecars
// before the apiserver's defaults, as Kruise's webhook did.
func kruiseInjected(set *v1alpha1.SidecarSet, image string, change func(exporter, shipper *corev1.Container)) *corev1.Pod {
	exporter := *set.Spec.Containers[0].Container.DeepCopy()
	exporter.Image = image
	shipper := *set.Spec.InitContainers[0].Container.DeepCopy()
	for _, c := range []*corev1.Container{&exporter, &shipper} {
		c.Env = append(c.Env, corev1.EnvVar{Name: "IS_INJECTED", Value: "true"})
	}
	if change != nil {
		change(&exporter, &shipper)
	}
	app := corev1.Container{Name: "mysql", Image: "mysql:8",
		Env: []corev1.EnvVar{
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "MYSQL_PORT", Value: "3306"},
		},
		VolumeMounts:  []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/mysql"}},
		VolumeDevices: []corev1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvda"}},
	}
	return testutil.Pod(testNS, "kruise-0").Labels(map[string]string{"app": "db"}).
		Annotations(map[string]string{
			"kruise.io/sidecarset-hash":               `{"mysql-sidecars":{"updateTimestamp":"2026-01-02T03:04:05Z","hash":"5d8c7f","sidecarSetName":"mysql-sidecars","sidecarList":["exporter","shipper"],"controllerRevision":"mysql-sidecars-7b9f"}}`,
			"kruise.io/sidecarset-hash-without-image": `{"mysql-sidecars":{"updateTimestamp":"2026-01-02T03:04:05Z","hash":"wv48x2","sidecarSetName":"mysql-sidecars","sidecarList":["exporter","shipper"]}}`,
			"kruise.io/sidecarset-injected-list":      "mysql-sidecars",
		}).
		Containers(apiserverDefaulted(exporter, corev1.PullIfNotPresent), apiserverDefaulted(app, corev1.PullIfNotPresent)).
		InitContainers(apiserverDefaulted(shipper, corev1.PullIfNotPresent)).
		Obj()
}

// TestAdoptableKruiseInjected: pods OpenKruise injected are the same sidecar
// when the container differs from the declared one only by what Kruise adds
// on injection, in the places it adds it: IS_INJECTED=true right after the
// declared env; after it, copies of the app containers' env vars
// (transferEnv, and the vars a shared mount's subPathExpr names); after the
// declared volume mounts and devices, copies of the app containers' ones
// (shareVolumePolicy, shareVolumeDevicePolicy). Only in a pod that carries
// Kruise's kruise.io/sidecarset-hash annotation; anything else still makes
// the pod not adoptable.
func TestAdoptableKruiseInjected(t *testing.T) {
	podIP := corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}
	data := corev1.VolumeMount{Name: "data", MountPath: "/var/lib/mysql"}
	tests := []struct {
		name string
		// set edits the declared set, change the sidecars Kruise injected,
		// pod the pod after the apiserver's defaults.
		set    func(set *v1alpha1.SidecarSet)
		change func(exporter, shipper *corev1.Container)
		pod    func(pod *corev1.Pod)
		want   bool
	}{
		{
			name: "IS_INJECTED appended to both sidecars, older image",
			want: true,
		},
		{
			name: "transferEnv copied the app's POD_IP and MYSQL_PORT after the mark",
			change: func(exporter, _ *corev1.Container) {
				exporter.Env = append(exporter.Env, podIP, corev1.EnvVar{Name: "MYSQL_PORT", Value: "3306"})
			},
			want: true,
		},
		{
			name: "shareVolumePolicy and shareVolumeDevicePolicy copied the app's mount and device",
			change: func(exporter, shipper *corev1.Container) {
				exporter.VolumeMounts = append(exporter.VolumeMounts, data)
				exporter.VolumeDevices = append(exporter.VolumeDevices, corev1.VolumeDevice{Name: "raw", DevicePath: "/dev/xvda"})
				shipper.VolumeMounts = append(shipper.VolumeMounts, data)
			},
			want: true,
		},
		{
			name: "no Kruise annotation on the pod: IS_INJECTED is an env var like any other",
			pod:  func(pod *corev1.Pod) { pod.Annotations = nil },
			want: false,
		},
		{
			name: "only the injected-list annotation, which Kruise before 0.9 did not write, is not enough",
			pod: func(pod *corev1.Pod) {
				pod.Annotations = map[string]string{"kruise.io/sidecarset-injected-list": "mysql-sidecars"}
			},
			want: false,
		},
		{
			name: "IS_INJECTED is not true",
			change: func(exporter, _ *corev1.Container) {
				exporter.Env[len(exporter.Env)-1].Value = "false"
			},
			want: false,
		},
		{
			name: "IS_INJECTED before a declared env var: not where Kruise puts it",
			change: func(exporter, _ *corev1.Container) {
				exporter.Env[0], exporter.Env[1] = exporter.Env[1], exporter.Env[0]
			},
			want: false,
		},
		{
			name: "an env var after the mark that no app container has",
			change: func(exporter, _ *corev1.Container) {
				exporter.Env = append(exporter.Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
			},
			want: false,
		},
		{
			name: "an app's env var name after the mark with another value",
			change: func(exporter, _ *corev1.Container) {
				exporter.Env = append(exporter.Env, corev1.EnvVar{Name: "MYSQL_PORT", Value: "3307"})
			},
			want: false,
		},
		{
			// Kruise never copies a name twice: at runtime the last one wins.
			name: "an app's env var repeated after the mark",
			change: func(exporter, _ *corev1.Container) {
				port := corev1.EnvVar{Name: "MYSQL_PORT", Value: "3306"}
				exporter.Env = append(exporter.Env, port, port)
			},
			want: false,
		},
		{
			name: "an app's env var named like a declared one: it would override it",
			set: func(set *v1alpha1.SidecarSet) {
				c := &set.Spec.Containers[0].Container
				c.Env = append(c.Env, corev1.EnvVar{Name: "MYSQL_PORT", Value: "9104"})
			},
			change: func(exporter, _ *corev1.Container) {
				exporter.Env = append(exporter.Env, corev1.EnvVar{Name: "MYSQL_PORT", Value: "3306"})
			},
			want: false,
		},
		{
			name: "an app's mount at a path the sidecar already uses",
			set: func(set *v1alpha1.SidecarSet) {
				c := &set.Spec.Containers[0].Container
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "conf", MountPath: "/var/lib/mysql"})
			},
			change: func(exporter, _ *corev1.Container) {
				exporter.VolumeMounts = append(exporter.VolumeMounts, data)
			},
			want: false,
		},
		{
			name: "a mount no app container has",
			change: func(exporter, _ *corev1.Container) {
				exporter.VolumeMounts = append(exporter.VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
			},
			want: false,
		},
		{
			name: "a mount only another injected sidecar has: Kruise shares the app containers' only",
			change: func(exporter, _ *corev1.Container) {
				exporter.VolumeMounts = append(exporter.VolumeMounts, corev1.VolumeMount{Name: "logs", MountPath: "/logs"})
			},
			pod: func(pod *corev1.Pod) {
				pod.Spec.Containers = append(pod.Spec.Containers, apiserverDefaulted(corev1.Container{
					Name: "envoy", Image: "envoy:1",
					Env:          []corev1.EnvVar{{Name: "IS_INJECTED", Value: "true"}},
					VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/logs"}},
				}, corev1.PullIfNotPresent))
			},
			want: false,
		},
		{
			name: "a declared mount is missing, the app's is there instead",
			set: func(set *v1alpha1.SidecarSet) {
				set.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/exporter"}}
			},
			change: func(exporter, _ *corev1.Container) {
				exporter.VolumeMounts = []corev1.VolumeMount{data}
			},
			want: false,
		},
		{
			name: "resources Kruise's resourcesPolicy computed: not what the set declares",
			change: func(exporter, _ *corev1.Container) {
				exporter.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("128Mi")
			},
			want: false,
		},
		{
			name: "hot upgrade renamed the sidecar exporter-1",
			change: func(exporter, _ *corev1.Container) {
				exporter.Name = "exporter-1"
			},
			want: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := adoptSet("exporter:v2")
			if tt.set != nil {
				tt.set(set)
			}
			pod := kruiseInjected(set, "exporter:v1", tt.change)
			if tt.pod != nil {
				tt.pod(pod)
			}
			podBefore := pod.DeepCopy()
			if got := Adoptable(pod, set); got != tt.want {
				t.Errorf("Adoptable = %v, want %v", got, tt.want)
			}
			if diff := cmp.Diff(podBefore, pod); diff != "" {
				t.Errorf("Adoptable modified the pod (-before +after):\n%s", diff)
			}
		})
	}
}
