package inject

import (
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject/resourceexpr"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// The resources a sidecar's resourcesPolicy computes at injection.
//
// The target containers are the pod's own: its regular containers and its
// native sidecars (init containers with restartPolicy Always) that no entry
// of the pod's record names and that no set injects in the same call, whose
// names targetContainersNameRegex matches. A plain init container has
// finished before the sidecar starts, so it is never a target. This is
// OpenKruise's choice of targets.
//
// Their resources combine per resource, by targetContainersMode: sum adds
// them up, max takes the largest. A target without a request counts with
// its limit (the apiserver has defaulted it so before any webhook sees the
// pod), or with 0 when it has neither. A target without a limit makes the
// combined limit unlimited: the limit expression is not evaluated and the
// sidecar gets no limit for that resource. Each expression then computes
// the sidecar's value from the combined one (resourceexpr describes the
// arithmetic and its rounding).
//
// With keepQoSClass, in a pod that is Guaranteed before injection (judged as
// qos.go does), the sidecar's request of each resource is set to its
// computed limit, or its limit to its computed request where no limit
// expression is given, so the pod stays Guaranteed.
//
// Worked cases, targets app (requests cpu 1, memory 1Gi; limits cpu 2,
// memory 1Gi) and worker (requests cpu 500m, memory 512Mi; no limits):
//
//	sum, requests cpu "cpu * 10%"                → requests cpu 150m
//	max, requests memory "memory / 4"            → requests memory 256Mi
//	sum, limits cpu "cpu" (worker is unlimited)  → no cpu limit
//	max, regex "^app$", limits cpu "cpu / 2"     → limits cpu 1
//
// and a Guaranteed pod whose one container app has requests = limits =
// cpu 1, memory 1Gi, with keepQoSClass, requests cpu "cpu * 10%", limits
// cpu "cpu * 20%", requests memory "memory / 8":
//
//	→ requests = limits = cpu 200m, memory 128Mi
//
// A set is left out of a pod (Result.Skipped), never failing its creation,
// where a policy cannot give its sidecar resources the apiserver takes:
// when the regex selects no container (OpenKruise refuses the pod), when an
// expression's result is negative or divides by zero, when a computed
// request is above the computed limit, and, with keepQoSClass in a
// Guaranteed pod, when a value is 0 (Guaranteed needs limits above 0).

// ownContainers returns the pod's regular containers and native sidecars
// that no entry of state names: the candidates for a resourcesPolicy.
func ownContainers(pod *corev1.Pod, state revision.State) []*corev1.Container {
	var own []*corev1.Container
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways && !injectedBySet(state, c.Name, true) {
			own = append(own, c)
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if !injectedBySet(state, c.Name, false) {
			own = append(own, c)
		}
	}
	return own
}

// computeResources returns, by container name, the resources the
// resourcesPolicy of each of set's sidecars computes for a pod whose own
// containers are own and that is Guaranteed or not; or why set cannot go
// into the pod.
func computeResources(set *v1alpha1.SidecarSet, own []*corev1.Container, isGuaranteed bool) (map[string]corev1.ResourceRequirements, string) {
	var out map[string]corev1.ResourceRequirements
	for sc := range sidecarsOf(set) {
		p := sc.ResourcesPolicy
		if p == nil {
			continue
		}
		r, err := policyResources(p, own, isGuaranteed)
		if err != nil {
			return nil, fmt.Sprintf("container %q resourcesPolicy: %v", sc.Name, err)
		}
		if out == nil {
			out = map[string]corev1.ResourceRequirements{}
		}
		out[sc.Name] = r
	}
	return out, ""
}

// policyResources returns the resources p computes from the targets among
// own.
func policyResources(p *v1alpha1.ResourcesPolicy, own []*corev1.Container, isGuaranteed bool) (corev1.ResourceRequirements, error) {
	pattern := p.TargetContainersNameRegex
	if pattern == "" {
		pattern = ".*"
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return corev1.ResourceRequirements{}, fmt.Errorf("targetContainersNameRegex %q: %w", pattern, err)
	}
	var targets []*corev1.Container
	for _, c := range own {
		if re.MatchString(c.Name) {
			targets = append(targets, c)
		}
	}
	if len(targets) == 0 {
		return corev1.ResourceRequirements{}, fmt.Errorf("no container of the pod matches targetContainersNameRegex %q", pattern)
	}
	var out corev1.ResourceRequirements
	for _, part := range []struct {
		name  string
		exprs *v1alpha1.ResourceExpressions
		limit bool
		into  *corev1.ResourceList
	}{
		{"limits", p.ResourcesExpr.Limits, true, &out.Limits},
		{"requests", p.ResourcesExpr.Requests, false, &out.Requests},
	} {
		if part.exprs == nil {
			continue
		}
		for _, res := range []struct {
			name corev1.ResourceName
			expr string
		}{{corev1.ResourceCPU, part.exprs.CPU}, {corev1.ResourceMemory, part.exprs.Memory}} {
			if res.expr == "" {
				continue
			}
			combined, limited := combine(targets, p.TargetContainersMode, res.name, part.limit)
			if !limited {
				continue // an unlimited target: the sidecar is unlimited too
			}
			q, err := evaluate(res.expr, res.name, combined)
			if err != nil {
				return corev1.ResourceRequirements{}, fmt.Errorf("resourcesExpr.%s.%s %q: %w", part.name, res.name, res.expr, err)
			}
			if *part.into == nil {
				*part.into = corev1.ResourceList{}
			}
			(*part.into)[res.name] = q
		}
	}
	if p.KeepQoSClass && isGuaranteed {
		if err := keepGuaranteed(&out); err != nil {
			return corev1.ResourceRequirements{}, err
		}
	}
	for name, req := range out.Requests {
		if lim, ok := out.Limits[name]; ok && req.Cmp(lim) > 0 {
			return corev1.ResourceRequirements{}, fmt.Errorf("the %s request computed, %s, is above the limit computed, %s, which the apiserver refuses", name, req.String(), lim.String())
		}
	}
	return out, nil
}

// combine returns the targets' requests (or limits) of name, added up or
// the largest; limited is false when a target has no limit.
func combine(targets []*corev1.Container, mode v1alpha1.TargetContainersMode, name corev1.ResourceName, limits bool) (q resource.Quantity, limited bool) {
	for _, c := range targets {
		v, ok := c.Resources.Limits[name]
		if !limits {
			v, _ = request(&c.Resources, name)
		} else if !ok {
			return resource.Quantity{}, false
		}
		switch mode {
		case v1alpha1.TargetContainersModeMax:
			if v.Cmp(q) > 0 {
				q = v.DeepCopy()
			}
		default:
			q.Add(v)
		}
	}
	return q, true
}

// evaluate computes expr for the combined value of name.
func evaluate(expr string, name corev1.ResourceName, combined resource.Quantity) (resource.Quantity, error) {
	e, err := resourceexpr.Parse(expr, string(name))
	if err != nil {
		return resource.Quantity{}, err
	}
	if name == corev1.ResourceCPU {
		return e.Eval(combined, resource.Milli, resource.DecimalSI)
	}
	return e.Eval(combined, 0, resource.BinarySI)
}

// keepGuaranteed makes r's requests equal its limits for cpu and memory,
// taking the limit where both are computed.
func keepGuaranteed(r *corev1.ResourceRequirements) error {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		v, ok := r.Limits[name]
		if !ok {
			v, ok = r.Requests[name]
		}
		switch {
		case !ok:
			return fmt.Errorf("keepQoSClass: the pod is Guaranteed and no %s expression gives the sidecar a %s limit", name, name)
		case v.IsZero():
			return fmt.Errorf("keepQoSClass: the pod is Guaranteed and the sidecar's %s computed is 0, which would make it Burstable", name)
		}
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Limits[name] = v
		r.Requests[name] = v.DeepCopy()
	}
	return nil
}
