package validation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

func TestDefault(t *testing.T) {
	cases := []struct {
		name string
		in   v1alpha1.SidecarSetSpec
		want v1alpha1.SidecarSetSpec
	}{
		{
			name: "everything unset",
			in: v1alpha1.SidecarSetSpec{
				Containers: []v1alpha1.SidecarContainer{sidecar("exporter", "prom/mysqld-exporter:v0.15.1")},
			},
			want: v1alpha1.SidecarSetSpec{
				Containers: []v1alpha1.SidecarContainer{{
					PodInjectPolicy: v1alpha1.BeforeAppContainer,
					Container: corev1.Container{
						Name:                     "exporter",
						Image:                    "prom/mysqld-exporter:v0.15.1",
						ImagePullPolicy:          corev1.PullIfNotPresent,
						TerminationMessagePath:   "/dev/termination-log",
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					},
				}},
				UpdateStrategy: v1alpha1.UpdateStrategy{
					Type:                    v1alpha1.RollingUpdateStrategy,
					Partition:               ptr.To(intstr.FromInt32(0)),
					MaxUnavailable:          ptr.To(intstr.FromInt32(1)),
					ProgressDeadlineSeconds: ptr.To[int32](600),
					MinReadySeconds:         ptr.To[int32](10),
				},
				DriftPolicy:          v1alpha1.DriftReport,
				AdoptionPolicy:       v1alpha1.AdoptNever,
				JobPods:              v1alpha1.JobPodsNativeSidecar,
				RevisionHistoryLimit: ptr.To[int32](10),
			},
		},
		{
			name: "values the user set are kept",
			in: v1alpha1.SidecarSetSpec{
				InitContainers: []v1alpha1.SidecarContainer{{
					PodInjectPolicy: v1alpha1.AfterAppContainer,
					Container: corev1.Container{
						Name:                     "log-shipper",
						Image:                    "fluent-bit:latest",
						ImagePullPolicy:          corev1.PullNever,
						TerminationMessagePath:   "/tmp/msg",
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					},
				}},
				UpdateStrategy: v1alpha1.UpdateStrategy{
					Type:                    v1alpha1.NotUpdateStrategy,
					Partition:               ptr.To(intstr.FromString("100%")),
					MaxUnavailable:          ptr.To(intstr.FromString("25%")),
					ProgressDeadlineSeconds: ptr.To[int32](60),
					MinReadySeconds:         ptr.To[int32](0),
				},
				DriftPolicy:          v1alpha1.DriftRevert,
				AdoptionPolicy:       v1alpha1.AdoptSameName,
				JobPods:              v1alpha1.JobPodsKeep,
				RevisionHistoryLimit: ptr.To[int32](0),
			},
			want: v1alpha1.SidecarSetSpec{
				InitContainers: []v1alpha1.SidecarContainer{{
					PodInjectPolicy: v1alpha1.AfterAppContainer,
					Container: corev1.Container{
						Name:                     "log-shipper",
						Image:                    "fluent-bit:latest",
						ImagePullPolicy:          corev1.PullNever,
						TerminationMessagePath:   "/tmp/msg",
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					},
				}},
				UpdateStrategy: v1alpha1.UpdateStrategy{
					Type:                    v1alpha1.NotUpdateStrategy,
					Partition:               ptr.To(intstr.FromString("100%")),
					MaxUnavailable:          ptr.To(intstr.FromString("25%")),
					ProgressDeadlineSeconds: ptr.To[int32](60),
					MinReadySeconds:         ptr.To[int32](0),
				},
				DriftPolicy:          v1alpha1.DriftRevert,
				AdoptionPolicy:       v1alpha1.AdoptSameName,
				JobPods:              v1alpha1.JobPodsKeep,
				RevisionHistoryLimit: ptr.To[int32](0),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: tc.in}
			Default(set)
			if diff := cmp.Diff(tc.want, set.Spec); diff != "" {
				t.Errorf("Default (-want +got):\n%s", diff)
			}
			again := set.DeepCopy()
			Default(again)
			if diff := cmp.Diff(set, again); diff != "" {
				t.Errorf("Default is not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
}

// TestDefaultContainerLikeApiserver checks the pod-container defaults one by
// one; the expected values are what the apiserver writes into a pod.
func TestDefaultContainerLikeApiserver(t *testing.T) {
	c := sidecar("exporter", "prom/mysqld-exporter:v0.15.1")
	c.Ports = []corev1.ContainerPort{{ContainerPort: 9104}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}
	c.Env = []corev1.EnvVar{
		{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k"}}},
	}
	c.Resources = corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.0005"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
	}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(9104)}}}
	c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9105}}, PeriodSeconds: 30}
	c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(9104), Path: "/quit"}}}
	set := &v1alpha1.SidecarSet{Spec: v1alpha1.SidecarSetSpec{Containers: []v1alpha1.SidecarContainer{c}}}

	Default(set)

	got := set.Spec.Containers[0].Container
	want := c.Container.DeepCopy()
	want.ImagePullPolicy = corev1.PullIfNotPresent
	want.TerminationMessagePath = "/dev/termination-log"
	want.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	want.Ports[0].Protocol = corev1.ProtocolTCP
	want.Env[0].ValueFrom.FieldRef.APIVersion = "v1"
	want.Env[1].ValueFrom.FileKeyRef.Optional = ptr.To(false)
	want.Resources = corev1.ResourceRequirements{
		// 0.0005 cpu is rounded up to 1m; the missing cpu request is the limit.
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
	}
	want.ReadinessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(9104), Path: "/", Scheme: corev1.URISchemeHTTP}},
		TimeoutSeconds:   1,
		PeriodSeconds:    10,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
	want.LivenessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9105, Service: ptr.To("")}},
		TimeoutSeconds:   1,
		PeriodSeconds:    30,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
	want.Lifecycle.PreStop.HTTPGet.Scheme = corev1.URISchemeHTTP
	// Quantities are compared by value: rounding leaves a different internal
	// form than parsing "1m".
	if diff := cmp.Diff(want, &got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("Default (-want +got):\n%s", diff)
	}
}

func TestDefaultVolumes(t *testing.T) {
	set := &v1alpha1.SidecarSet{Spec: v1alpha1.SidecarSetSpec{Volumes: []corev1.Volume{
		{Name: "scratch"},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, DefaultMode: ptr.To[int32](0o600),
		}}},
		{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}},
		}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "ns", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}},
	}}}

	Default(set)

	want := []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log", Type: ptr.To(corev1.HostPathUnset)}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr.To[int32](0o644)}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, DefaultMode: ptr.To[int32](0o600),
		}}},
		{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items:       []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}}},
			DefaultMode: ptr.To[int32](0o644),
		}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "ns", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			},
			DefaultMode: ptr.To[int32](0o644),
		}}},
	}
	if diff := cmp.Diff(want, set.Spec.Volumes); diff != "" {
		t.Errorf("Default volumes (-want +got):\n%s", diff)
	}
}

// An image-only edit stays an in-place update although the defaulter derives
// a different pull policy from the new image.
func TestDefaultKeepsImageEditInPlace(t *testing.T) {
	declare := func(image string) *v1alpha1.SidecarSet {
		set := testutil.SidecarSet("exporter").Selector(map[string]string{"app": "db"}).Container("exporter", image).Obj()
		Default(set)
		return set
	}
	old, updated := declare("exporter:latest"), declare("exporter:v2")
	if old.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways || updated.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Fatalf("pull policies %s and %s, want Always and IfNotPresent", old.Spec.Containers[0].ImagePullPolicy, updated.Spec.Containers[0].ImagePullPolicy)
	}
	if o, n := revision.ImagelessHash(&old.Spec), revision.ImagelessHash(&updated.Spec); o != n {
		t.Errorf("ImagelessHash %s -> %s: an image change from :latest to :v2 would need a recreate", o, n)
	}
}
