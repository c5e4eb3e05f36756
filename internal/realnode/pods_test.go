package realnode

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestFitPod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want corev1.PodSpec
	}{
		{
			name: "bound, local images, no DNS or token, two seconds to stop",
			in: corev1.PodSpec{
				InitContainers:                []corev1.Container{{Name: "schema", Image: "schema:v1"}},
				Containers:                    []corev1.Container{{Name: "mysql", Image: "mysql:8.4", ImagePullPolicy: corev1.PullAlways}},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
			},
			want: corev1.PodSpec{
				NodeName:                      NodeName,
				DNSPolicy:                     corev1.DNSDefault,
				AutomountServiceAccountToken:  ptr.To(false),
				EnableServiceLinks:            ptr.To(false),
				TerminationGracePeriodSeconds: ptr.To[int64](2),
				InitContainers:                []corev1.Container{{Name: "schema", Image: "schema:v1", ImagePullPolicy: corev1.PullNever}},
				Containers:                    []corev1.Container{{Name: "mysql", Image: "mysql:8.4", ImagePullPolicy: corev1.PullNever}},
			},
		},
		{
			name: "a longer grace period and a node name stay",
			in:   corev1.PodSpec{NodeName: "elsewhere", TerminationGracePeriodSeconds: ptr.To[int64](30)},
			want: corev1.PodSpec{
				NodeName:                      "elsewhere",
				DNSPolicy:                     corev1.DNSDefault,
				AutomountServiceAccountToken:  ptr.To(false),
				EnableServiceLinks:            ptr.To(false),
				TerminationGracePeriodSeconds: ptr.To[int64](30),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in
			FitPod(&got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FitPod (-want +got):\n%s", diff)
			}
		})
	}
}
