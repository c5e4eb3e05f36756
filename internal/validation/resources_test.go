package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

func withPolicy(modify func(p *v1alpha1.ResourcesPolicy)) func(*v1alpha1.SidecarSet) {
	return func(s *v1alpha1.SidecarSet) {
		p := &v1alpha1.ResourcesPolicy{
			TargetContainersMode:      v1alpha1.TargetContainersModeSum,
			TargetContainersNameRegex: ".*",
			ResourcesExpr: v1alpha1.ResourcesExpr{
				Limits:   &v1alpha1.ResourceExpressions{CPU: "max(cpu * 10%, 50m)"},
				Requests: &v1alpha1.ResourceExpressions{Memory: "memory / 4"},
			},
		}
		if modify != nil {
			modify(p)
		}
		s.Spec.Containers[0].ResourcesPolicy = p
	}
}

func TestValidateResourcesPolicy(t *testing.T) {
	const pp = "spec.containers[0].resourcesPolicy"
	runValidateCreate(t, []validateCase{
		{name: "a valid policy", modify: withPolicy(nil)},
		{
			name: "keepQoSClass with cpu and memory",
			modify: withPolicy(func(p *v1alpha1.ResourcesPolicy) {
				p.KeepQoSClass = true
			}),
		},
		{
			name: "beside fixed resources",
			modify: func(s *v1alpha1.SidecarSet) {
				withPolicy(nil)(s)
				s.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
			},
			want:   err(field.ErrorTypeForbidden, "spec.containers[0].resources"),
			reason: "may not be set with resourcesPolicy, which computes them at injection",
		},
		{
			name:   "without a mode",
			modify: withPolicy(func(p *v1alpha1.ResourcesPolicy) { p.TargetContainersMode = "" }),
			want:   err(field.ErrorTypeRequired, pp+".targetContainersMode"),
		},
		{
			name:   "an unknown mode",
			modify: withPolicy(func(p *v1alpha1.ResourcesPolicy) { p.TargetContainersMode = "avg" }),
			want:   err(field.ErrorTypeNotSupported, pp+".targetContainersMode"),
			reason: `supported values: "sum", "max"`,
		},
		{
			name:   "a regex that does not compile",
			modify: withPolicy(func(p *v1alpha1.ResourcesPolicy) { p.TargetContainersNameRegex = "app(" }),
			want:   err(field.ErrorTypeInvalid, pp+".targetContainersNameRegex"),
			reason: "missing closing )",
		},
		{
			name: "no expression",
			modify: withPolicy(func(p *v1alpha1.ResourcesPolicy) {
				p.ResourcesExpr = v1alpha1.ResourcesExpr{Limits: &v1alpha1.ResourceExpressions{}}
			}),
			want:   err(field.ErrorTypeRequired, pp+".resourcesExpr"),
			reason: "at least one expression under limits or requests",
		},
		{
			name:   "an expression that does not parse",
			modify: withPolicy(func(p *v1alpha1.ResourcesPolicy) { p.ResourcesExpr.Limits.CPU = "cpu * cpu" }),
			want:   err(field.ErrorTypeInvalid, pp+".resourcesExpr.limits.cpu"),
			reason: `"*" at offset 4 multiplies two quantities: one side must be a plain number`,
		},
		{
			name:   "memory named in a cpu expression",
			modify: withPolicy(func(p *v1alpha1.ResourcesPolicy) { p.ResourcesExpr.Requests.CPU = "memory / 2" }),
			want:   err(field.ErrorTypeInvalid, pp+".resourcesExpr.requests.cpu"),
			reason: `unknown name "memory" at offset 0: this expression may use only cpu`,
		},
		{
			name:   "keepQoSClass without memory",
			modify: withPolicy(func(p *v1alpha1.ResourcesPolicy) { p.KeepQoSClass = true; p.ResourcesExpr.Requests = nil }),
			want:   err(field.ErrorTypeRequired, pp+".resourcesExpr"),
			reason: "keepQoSClass needs a memory expression under limits or requests",
		},
		{
			name: "on a native sidecar",
			modify: func(s *v1alpha1.SidecarSet) {
				withPolicy(nil)(s)
				s.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				s.Spec.InitContainers, s.Spec.Containers = s.Spec.Containers, nil
			},
		},
		{
			name: "on a plain init container",
			modify: func(s *v1alpha1.SidecarSet) {
				withPolicy(nil)(s)
				s.Spec.InitContainers, s.Spec.Containers = s.Spec.Containers, nil
			},
			want:   err(field.ErrorTypeForbidden, "spec.initContainers[0].resourcesPolicy"),
			reason: "needs restartPolicy: Always (a native sidecar)",
		},
	})
}

func TestDefaultResourcesPolicyRegex(t *testing.T) {
	set := mysqlExporter()
	withPolicy(func(p *v1alpha1.ResourcesPolicy) { p.TargetContainersNameRegex = "" })(set)
	Default(set)
	if got := set.Spec.Containers[0].ResourcesPolicy.TargetContainersNameRegex; got != ".*" {
		t.Errorf("targetContainersNameRegex defaults to %q, want .*", got)
	}
}
