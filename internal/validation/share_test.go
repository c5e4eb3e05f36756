package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

func fromField(path string) *v1alpha1.SourceContainerNameSource {
	return &v1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
}

func withTransfer(t ...v1alpha1.TransferEnvVar) func(*v1alpha1.SidecarSet) {
	return func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].TransferEnv = t }
}

func TestValidateShareAndTransfer(t *testing.T) {
	const tp = "spec.containers[0].transferEnv[0]"
	runValidateCreate(t, []validateCase{
		{
			name: "shareVolumePolicy of an unknown type",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].ShareVolumePolicy = &v1alpha1.SharePolicy{Type: "Enabled"}
			},
			want:   err(field.ErrorTypeNotSupported, "spec.containers[0].shareVolumePolicy.type"),
			reason: `supported values: "enabled", "disabled"`,
		},
		{
			name: "shareVolumeDevicePolicy without a type",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].ShareVolumeDevicePolicy = &v1alpha1.SharePolicy{}
			},
			want: err(field.ErrorTypeRequired, "spec.containers[0].shareVolumeDevicePolicy.type"),
		},
		{
			name:   "transferEnv without a source",
			modify: withTransfer(v1alpha1.TransferEnvVar{EnvName: "A"}),
			want:   err(field.ErrorTypeRequired, tp),
			reason: "one of sourceContainerName and sourceContainerNameFrom",
		},
		{
			name:   "transferEnv with both sources",
			modify: withTransfer(v1alpha1.TransferEnvVar{SourceContainerName: "app", SourceContainerNameFrom: fromField("metadata.name"), EnvName: "A"}),
			want:   err(field.ErrorTypeInvalid, tp),
			reason: "only one of sourceContainerName and sourceContainerNameFrom",
		},
		{
			name:   "transferEnv with both envName and envNames",
			modify: withTransfer(v1alpha1.TransferEnvVar{SourceContainerName: "app", EnvName: "A", EnvNames: []string{"B"}}),
			want:   err(field.ErrorTypeInvalid, tp),
			reason: "only one of envName and envNames",
		},
		{
			name:   "transferEnv without a variable",
			modify: withTransfer(v1alpha1.TransferEnvVar{SourceContainerName: "app"}),
			want:   err(field.ErrorTypeRequired, tp),
			reason: "one of envName and envNames",
		},
		{
			name:   "transferEnv with an empty envNames",
			modify: withTransfer(v1alpha1.TransferEnvVar{SourceContainerName: "app", EnvNames: []string{}}),
			want:   err(field.ErrorTypeRequired, tp+".envNames"),
		},
		{
			name:   "transferEnv from a fieldPath injection cannot read",
			modify: withTransfer(v1alpha1.TransferEnvVar{SourceContainerNameFrom: fromField("spec.nodeName"), EnvName: "A"}),
			want:   err(field.ErrorTypeNotSupported, tp+".sourceContainerNameFrom.fieldRef.fieldPath"),
			reason: "metadata.labels['KEY']",
		},
		{
			name:   "transferEnv fieldRef without fieldRef",
			modify: withTransfer(v1alpha1.TransferEnvVar{SourceContainerNameFrom: &v1alpha1.SourceContainerNameSource{}, EnvName: "A"}),
			want:   err(field.ErrorTypeRequired, tp+".sourceContainerNameFrom.fieldRef"),
		},
		{
			name: "transferEnv of a variable the sidecar declares too",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "B", Value: "mine"}}
				withTransfer(v1alpha1.TransferEnvVar{SourceContainerName: "app", EnvNames: []string{"A", "B"}})(s)
			},
			want:   err(field.ErrorTypeInvalid, tp+".envNames[1]"),
			reason: "the container's env declares this variable too",
		},
		{
			name:   "transferEnv with an invalid container name",
			modify: withTransfer(v1alpha1.TransferEnvVar{SourceContainerName: "App", EnvName: "A"}),
			want:   err(field.ErrorTypeInvalid, tp+".sourceContainerName"),
		},
	})
	runValidateCreate(t, []validateCase{
		{
			name: "both share policies and transferEnv in both forms",
			modify: func(s *v1alpha1.SidecarSet) {
				c := &s.Spec.Containers[0]
				c.ShareVolumePolicy = &v1alpha1.SharePolicy{Type: v1alpha1.SharePolicyEnabled}
				c.ShareVolumeDevicePolicy = &v1alpha1.SharePolicy{Type: v1alpha1.SharePolicyDisabled}
				c.TransferEnv = []v1alpha1.TransferEnvVar{
					{SourceContainerName: "app", EnvName: "A"},
					{SourceContainerNameFrom: fromField("metadata.labels['app.example.com/main']"), EnvNames: []string{"B", "C"}},
				}
			},
		},
	})
}
