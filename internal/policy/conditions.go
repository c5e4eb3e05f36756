package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// maxPodContainers is the webhook's bound (webhook.MaxPodContainers): a
// larger pod passes through untouched.
const maxPodContainers = 1000

// matchConditions returns the conditions under which inject would take set
// into a pod the selectors already matched.
func matchConditions(set *v1alpha1.SidecarSet) ([]admissionregistrationv1.MatchCondition, error) {
	var names, initNames []string
	for _, c := range set.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range set.Spec.InitContainers {
		initNames = append(initNames, c.Name)
	}
	all := append(slices.Clone(names), initNames...)
	if dup := duplicate(all); dup != "" {
		return nil, unsupported("it declares container %q twice, so the webhook never injects it", dup)
	}
	ports, err := portConditions(set)
	if err != nil {
		return nil, err
	}

	conds := []admissionregistrationv1.MatchCondition{
		{Name: "not-opted-out", Expression: fmt.Sprintf(
			`!has(object.metadata.annotations) || !(%[1]q in object.metadata.annotations) || object.metadata.annotations[%[1]q] != "false"`,
			v1alpha1.AnnotationInject)},
		{Name: "not-injected", Expression: notInjected(set, names, initNames)},
		{Name: "pod-size", Expression: fmt.Sprintf(
			`size(object.spec.containers) + (has(object.spec.initContainers) ? size(object.spec.initContainers) : 0) <= %d`, maxPodContainers)},
	}
	if len(all) > 0 {
		list := celList(all)
		conds = append(conds, admissionregistrationv1.MatchCondition{Name: "container-names-free", Expression: fmt.Sprintf(
			`!object.spec.containers.exists(c, c.name in %[1]s) && `+
				`!(has(object.spec.initContainers) && object.spec.initContainers.exists(c, c.name in %[1]s)) && `+
				`!(has(object.spec.ephemeralContainers) && object.spec.ephemeralContainers.exists(c, c.name in %[1]s))`, list)})
	}
	if missing := undeclaredVolumes(set); len(missing) > 0 {
		var each []string
		for _, v := range missing {
			each = append(each, fmt.Sprintf(`object.spec.volumes.exists(v, v.name == %s)`, strconv.Quote(v)))
		}
		conds = append(conds, admissionregistrationv1.MatchCondition{Name: "volumes-declared",
			Expression: "has(object.spec.volumes) && " + strings.Join(each, " && ")})
	}
	conds = append(conds, ports...)
	return conds, nil
}

// notInjected says the pod carries no record of the set, or only a stale one
// (inject drops a record whose containers are not in the pod, as on a pod
// copied from a running one). Records are the per-set key and the set's
// name in sidecarset.dev/injected; staleness is judged by the set's current
// containers, in the lists they go into now (in a Job's pod with jobPods
// NativeSidecar, the init containers).
func notInjected(set *v1alpha1.SidecarSet, names, initNames []string) string {
	recorded := fmt.Sprintf(`has(object.metadata.annotations) && (%q in object.metadata.annotations || `+
		`(%[2]q in object.metadata.annotations && %[3]s in object.metadata.annotations[%[2]q].split(",")))`,
		revision.PerSetKey(set.Name), v1alpha1.AnnotationInjected, strconv.Quote(set.Name))
	inInit := func(names []string) string {
		return fmt.Sprintf(`!(has(object.spec.initContainers) && %s.all(n, object.spec.initContainers.exists(c, c.name == n)))`, celList(names))
	}
	var missing []string
	if len(names) > 0 {
		regular := fmt.Sprintf(`!%s.all(n, object.spec.containers.exists(c, c.name == n))`, celList(names))
		if set.Spec.JobPods != v1alpha1.JobPodsKeep {
			regular = fmt.Sprintf(`(%s ? %s : %s)`, jobPod, inInit(names), regular)
		}
		missing = append(missing, regular)
	}
	if len(initNames) > 0 {
		missing = append(missing, inInit(initNames))
	}
	if len(missing) == 0 {
		return "!(" + recorded + ")"
	}
	return fmt.Sprintf("!(%s) || %s", recorded, strings.Join(missing, " || "))
}

func celList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

func duplicate(names []string) string {
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return n
		}
		seen[n] = true
	}
	return ""
}

// undeclaredVolumes are the volumes the set's containers mount or use as a
// device that the set does not declare, sorted: the pod must declare them.
func undeclaredVolumes(set *v1alpha1.SidecarSet) []string {
	declared := map[string]bool{}
	for _, v := range set.Spec.Volumes {
		declared[v.Name] = true
	}
	var out []string
	add := func(name string) {
		if !declared[name] && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for _, cs := range [][]v1alpha1.SidecarContainer{set.Spec.Containers, set.Spec.InitContainers} {
		for _, c := range cs {
			for _, vm := range c.VolumeMounts {
				add(vm.Name)
			}
			for _, d := range c.VolumeDevices {
				add(d.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// runningPorts are the ports of the set's containers that run beside the
// pod's: regular containers and native sidecars.
func runningPorts(set *v1alpha1.SidecarSet) (regular, native []corev1.ContainerPort, names []string) {
	for _, c := range set.Spec.Containers {
		regular = append(regular, c.Ports...)
		for range c.Ports {
			names = append(names, c.Name)
		}
	}
	for _, c := range set.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			native = append(native, c.Ports...)
			for range c.Ports {
				names = append(names, c.Name)
			}
		}
	}
	return regular, native, names
}

// portConditions are inject's port checks (portClash) against the pod's
// running containers. A clash among the set's own containers holds for
// every pod, so the webhook never injects such a set: Unsupported.
func portConditions(set *v1alpha1.SidecarSet) ([]admissionregistrationv1.MatchCondition, error) {
	regular, native, names := runningPorts(set)
	ports := append(slices.Clone(regular), native...)
	for i, p := range ports {
		for j := range i {
			q := ports[j]
			if cmp.Or(p.Protocol, corev1.ProtocolTCP) != cmp.Or(q.Protocol, corev1.ProtocolTCP) {
				continue
			}
			if p.ContainerPort == q.ContainerPort || p.HostPort != 0 && p.HostPort == q.HostPort && (p.HostIP == q.HostIP || p.HostIP == "" || q.HostIP == "") {
				return nil, unsupported("containers %q and %q declare clashing ports (%d)", names[j], names[i], p.ContainerPort)
			}
		}
	}
	var conds []admissionregistrationv1.MatchCondition
	var clashes []string
	for _, p := range ports {
		proto := strconv.Quote(string(cmp.Or(p.Protocol, corev1.ProtocolTCP)))
		clash := fmt.Sprintf(`q.containerPort == %d`, p.ContainerPort)
		if p.HostPort != 0 {
			clash += fmt.Sprintf(` || (has(q.hostPort) && q.hostPort == %d`, p.HostPort)
			if p.HostIP != "" {
				clash += fmt.Sprintf(` && (!has(q.hostIP) || q.hostIP == "" || q.hostIP == %s)`, strconv.Quote(p.HostIP))
			}
			clash += ")"
		}
		clashes = append(clashes, fmt.Sprintf(`((has(q.protocol) ? q.protocol : "TCP") == %s && (%s))`, proto, clash))
	}
	if len(clashes) > 0 {
		anyClash := strings.Join(clashes, " || ")
		conds = append(conds, admissionregistrationv1.MatchCondition{Name: "ports-free", Expression: fmt.Sprintf(
			`!object.spec.containers.exists(c, has(c.ports) && c.ports.exists(q, %[1]s)) && `+
				`!(has(object.spec.initContainers) && object.spec.initContainers.exists(c, has(c.restartPolicy) && c.restartPolicy == "Always" && has(c.ports) && c.ports.exists(q, %[1]s)))`, anyClash)})
	}
	if slices.ContainsFunc(regular, func(p corev1.ContainerPort) bool { return p.HostPort != 0 && p.HostPort != p.ContainerPort }) {
		conds = append(conds, admissionregistrationv1.MatchCondition{Name: "not-host-network",
			Expression: `!has(object.spec.hostNetwork) || !object.spec.hostNetwork`})
	}
	return conds, nil
}

// podSecurityCondition keeps the set out of namespaces that enforce a Pod
// Security level its sidecars break, as a CEL expression over
// namespaceObject (which matchConditions do not see, so the mutation
// tests it), or "" when the sidecars meet every level. CEL cannot run the apiserver's checks
// on the whole pod, so the sidecars are judged alone, in a pod that sets
// nothing else: a sidecar that meets "restricted" only thanks to the pod's
// own securityContext is kept out of restricted namespaces, where the
// webhook would inject it into such a pod. Judging the other way would let
// the policy make a pod's creation fail.
func podSecurityCondition(set *v1alpha1.SidecarSet) string {
	spec := &corev1.PodSpec{Volumes: set.Spec.Volumes}
	for _, c := range set.Spec.Containers {
		spec.Containers = append(spec.Containers, c.Container)
	}
	for _, c := range set.Spec.InitContainers {
		spec.InitContainers = append(spec.InitContainers, c.Container)
	}
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(fmt.Sprintf("pod security evaluator: %v", err))
	}
	passes := func(level psapi.Level) bool {
		lv := psapi.LevelVersion{Level: level, Version: psapi.LatestVersion()}
		return policy.AggregateCheckResults(e.EvaluatePod(lv, &metav1.ObjectMeta{}, spec)).Allowed
	}
	var allowed []string
	switch {
	case passes(psapi.LevelRestricted):
		return ""
	case passes(psapi.LevelBaseline):
		allowed = []string{string(psapi.LevelPrivileged), string(psapi.LevelBaseline)}
	default:
		allowed = []string{string(psapi.LevelPrivileged)}
	}
	return fmt.Sprintf(
		`!has(namespaceObject.metadata.labels) || !(%[1]q in namespaceObject.metadata.labels) || namespaceObject.metadata.labels[%[1]q] in %[2]s`,
		psapi.EnforceLevelLabel, celList(allowed))
}
