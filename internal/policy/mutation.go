package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// mutation is the CEL of one set's JSONPatch, built from literals computed
// once at compile time.
type mutation struct {
	set    *v1alpha1.SidecarSet
	record revision.SetState
	// The containers' literals, each list in declared order.
	before, after, initBefore []string
	// native are the literals of the regular containers as native sidecars,
	// in declared order, for a Job's pod (jobPods NativeSidecar); nil when
	// the set has no regular container or keeps them regular. jobRecord is
	// the record such a pod gets.
	native      []string
	jobRecord   revision.SetState
	volumes     []named
	pullSecrets []named
}

// named is a literal with the name the pod may already use.
type named struct {
	name, literal string
}

func newMutation(set *v1alpha1.SidecarSet) (*mutation, error) {
	m := &mutation{set: set, record: recordOf(set)}
	if len(set.Spec.PatchPodMetadata) > 0 {
		// Retain and Overwrite would be an add operation each, but
		// MergePatchJson, and the warning when a pod's value cannot be
		// merged, need the webhook: one implementation of the rules keeps
		// every set's annotations the same whichever path injects it.
		return nil, unsupported("spec.patchPodMetadata is written by the webhook")
	}
	for i, cs := range [][]v1alpha1.SidecarContainer{set.Spec.Containers, set.Spec.InitContainers} {
		field := []string{"containers", "initContainers"}[i]
		for _, c := range cs {
			if c.Hot() {
				// Two slots, their version annotations and their
				// record: the webhook's, as one implementation.
				return nil, unsupported("container %q is upgraded hot, which the webhook injects", c.Name)
			}
			if what := takesFromApps(&c); what != "" {
				return nil, unsupported("container %q uses %s, which the webhook fills in from the pod's app containers", c.Name, what)
			}
			lit, err := literal("Object.spec."+field, &c.Container)
			if err != nil {
				return nil, err
			}
			after := c.PodInjectPolicy == v1alpha1.AfterAppContainer
			switch {
			case i == 0 && after:
				m.after = append(m.after, lit)
			case i == 0:
				m.before = append(m.before, lit)
			case after:
				// With no init container of the pod's own between them, the
				// records cannot tell another set's before from its after
				// containers, so this one's place would depend on the order
				// the policies ran in.
				return nil, unsupported("init container %q is AfterAppContainer, whose place among other sets' init containers a policy cannot know", c.Name)
			default:
				m.initBefore = append(m.initBefore, lit)
			}
		}
	}
	if set.Spec.JobPods != v1alpha1.JobPodsKeep && len(set.Spec.Containers) > 0 {
		m.jobRecord = jobRecordOf(m.record)
		for i := range set.Spec.Containers {
			c := set.Spec.Containers[i].Container.DeepCopy()
			c.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
			lit, err := literal("Object.spec.initContainers", c)
			if err != nil {
				return nil, err
			}
			m.native = append(m.native, lit)
		}
	}
	for i := range set.Spec.Volumes {
		lit, err := literal("Object.spec.volumes", &set.Spec.Volumes[i])
		if err != nil {
			return nil, err
		}
		m.volumes = append(m.volumes, named{set.Spec.Volumes[i].Name, lit})
	}
	for _, s := range set.Spec.ImagePullSecrets {
		lit, err := literal("Object.spec.imagePullSecrets", s)
		if err != nil {
			return nil, err
		}
		m.pullSecrets = append(m.pullSecrets, named{s.Name, lit})
	}
	return m, nil
}

// recordMarker is what the record of a set holds for its container name, as
// revision.Encode writes it: a regular container's name is followed by its
// image, an init container's by "init": true.
func recordMarker(nameExpr string, init bool) string {
	if init {
		return `'"name":"' + ` + nameExpr + ` + '","init":true'`
	}
	return `'"name":"' + ` + nameExpr + ` + '","image"'`
}

// variables are computed from the pod as the policy receives it.
//
// earlier and later are the per-set records of the sets before and after
// this one by name. The placement variables are the indexes between which
// the set's containers go: first, the first container no earlier set
// recorded (the containers' length when there is none); Kept, ending with
// one past the last container no later set recorded (0 when there is none).
func (m *mutation) variables() []admissionregistrationv1.Variable {
	name := strconv.Quote(m.set.Name)
	records := func(op string) string {
		return fmt.Sprintf(`variables.annotations.filter(k, k.startsWith(%q) && k.substring(%d) %s %s).map(k, variables.annotations[k])`,
			revision.PerSetPrefix, len(revision.PerSetPrefix), op, name)
	}
	vars := []admissionregistrationv1.Variable{
		{Name: "annotations", Expression: `has(object.metadata.annotations) ? object.metadata.annotations : {}`},
		{Name: "earlier", Expression: records("<")},
		{Name: "later", Expression: records(">")},
	}
	place := func(prefix, field string, init, after bool) {
		list := "object.spec." + field
		vars = append(vars, admissionregistrationv1.Variable{Name: prefix + "First", Expression: fmt.Sprintf(
			`(%s.transformList(i, c, !variables.earlier.exists(r, r.contains(%s)), i) + [size(%s)])[0]`,
			list, recordMarker("c.name", init), list)})
		if after {
			vars = append(vars, admissionregistrationv1.Variable{Name: prefix + "Kept", Expression: fmt.Sprintf(
				`[0] + %s.transformList(i, c, !variables.later.exists(r, r.contains(%s)), i + 1)`,
				list, recordMarker("c.name", init))})
		}
	}
	if len(m.before)+len(m.after) > 0 {
		place("containers", "containers", false, len(m.after) > 0)
	}
	if len(m.initBefore)+len(m.native) > 0 {
		place("initContainers", "initContainers", true, false)
	}
	return vars
}

// jobPod is true for a pod meant to finish, into which a set with jobPods
// NativeSidecar puts its regular containers as native sidecars
// (inject.NativeInPod).
const jobPod = `has(object.spec.restartPolicy) && object.spec.restartPolicy in ["Never", "OnFailure"]`

// jobRecordOf returns rec, a set's record, as a Job's pod gets it: every
// container in the init containers.
func jobRecordOf(rec revision.SetState) revision.SetState {
	rec.Containers = slices.Clone(rec.Containers)
	for i := range rec.Containers {
		rec.Containers[i].Init = true
	}
	return rec
}

// expression is the JSONPatch expression: a list of operations, applied in
// order, so each index accounts for the containers added before it.
//
// For a set with jobPods NativeSidecar, the containers and the record depend
// on the pod: a Job's pod (jobPod) gets the regular containers as native
// sidecars after the set's own init containers, and the record that says so.
func (m *mutation) expression() string {
	var parts []string
	if m.native != nil {
		parts = append(parts, fmt.Sprintf("(%s ?\n%s\n: %s)", jobPod,
			strings.Join(append(m.initAdds(append(slices.Clone(m.initBefore), m.native...)), m.records(m.jobRecord)), " + "),
			strings.Join(append(m.containerAdds(), m.records(m.record)), " + ")))
	} else {
		parts = append(append(parts, m.containerAdds()...), m.records(m.record))
	}
	if len(m.volumes) > 0 {
		parts = append(parts, merged("volumes", m.volumes))
	}
	if len(m.pullSecrets) > 0 {
		parts = append(parts, merged("imagePullSecrets", m.pullSecrets))
	}
	parts = append(parts, managedLabel())
	patch := strings.Join(parts, " +\n")
	if cond := podSecurityCondition(m.set); cond != "" {
		return fmt.Sprintf("(%s) ?\n%s\n: []", cond, patch)
	}
	return patch
}

// containerAdds returns the patches adding the set's containers and init
// containers where they go in a pod that is not a Job's.
func (m *mutation) containerAdds() []string {
	var parts []string
	if len(m.before)+len(m.after) > 0 {
		parts = append(parts, "["+strings.Join(placed("/spec/containers", "variables.containers", m.before, m.after), ", ")+"]")
	}
	return append(parts, m.initAdds(m.initBefore)...)
}

// initAdds returns the patch adding init, literals of init containers, before
// the pod's own init containers.
func (m *mutation) initAdds(init []string) []string {
	if len(init) == 0 {
		return nil
	}
	return []string{fmt.Sprintf(`(has(object.spec.initContainers) ? [%s] : [%s])`,
		strings.Join(placed("/spec/initContainers", "variables.initContainers", init, nil), ", "),
		addOp(strconv.Quote("/spec/initContainers"), "["+strings.Join(init, ", ")+"]"))}
}

// placed returns the operations adding before and after into the list at
// path, between the indexes in the variables named prefix+"First" and
// prefix+"Kept".
func placed(path, prefix string, before, after []string) []string {
	var ops []string
	for j, lit := range before {
		ops = append(ops, addOp(fmt.Sprintf(`%q + string(%sFirst + %d)`, path+"/", prefix, j), lit))
	}
	end := fmt.Sprintf(`%sKept[size(%sKept) - 1]`, prefix, prefix)
	for j, lit := range after {
		ops = append(ops, addOp(fmt.Sprintf(`%q + string(%s + %d)`, path+"/", end, len(before)+j), lit))
	}
	return ops
}

func addOp(pathExpr, value string) string {
	return fmt.Sprintf(`JSONPatch{op: "add", path: %s, value: %s}`, pathExpr, value)
}

// merged adds the items the pod's spec.<field> lacks by name: a pod's own
// volume (or secret) wins.
func merged(field string, items []named) string {
	path := "/spec/" + field
	var adds, all []string
	for _, it := range items {
		adds = append(adds, fmt.Sprintf(`(object.spec.%s.exists(x, x.name == %s) ? [] : [%s])`,
			field, strconv.Quote(it.name), addOp(strconv.Quote(path+"/-"), it.literal)))
		all = append(all, it.literal)
	}
	return fmt.Sprintf(`(has(object.spec.%s) ? %s : [%s])`, field, strings.Join(adds, " + "),
		addOp(strconv.Quote(path), "["+strings.Join(all, ", ")+"]"))
}

// records writes rec as the set's per-set record and adds its name to
// sidecarset.dev/injected, kept sorted.
func (m *mutation) records(rec revision.SetState) string {
	key := revision.PerSetKey(m.set.Name)
	value := strconv.Quote(revision.EncodeSetState(rec))
	name := strconv.Quote(m.set.Name)
	listed := fmt.Sprintf(`((%[1]q in variables.annotations && variables.annotations[%[1]q] != "" ? variables.annotations[%[1]q].split(",") : []) + [%[2]s]).distinct().sort().join(",")`,
		v1alpha1.AnnotationInjected, name)
	return fmt.Sprintf(`(has(object.metadata.annotations) ? [%s, %s] : [%s])`,
		addOp(strconv.Quote("/metadata/annotations/"+escape(key)), value),
		addOp(strconv.Quote("/metadata/annotations/"+escape(v1alpha1.AnnotationInjected)), listed),
		addOp(`"/metadata/annotations"`, fmt.Sprintf(`{%q: %s, %q: %s}`, key, value, v1alpha1.AnnotationInjected, name)))
}

func managedLabel() string {
	return fmt.Sprintf(`(has(object.metadata.labels) ? [%s] : [%s])`,
		addOp(strconv.Quote("/metadata/labels/"+escape(v1alpha1.LabelManaged)), `"true"`),
		addOp(`"/metadata/labels"`, fmt.Sprintf(`{%q: "true"}`, v1alpha1.LabelManaged)))
}

// escape escapes a key for a JSON pointer (RFC 6901).
func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// takesFromApps names the field of c that asks for something of the pod's
// app containers, or returns "". A policy could copy their mounts and
// variables in CEL, but which containers are the app's needs the records of
// every set injected before, and the skip rules (paths in use, devices,
// propagation) would be a second implementation to keep equal to the
// webhook's: such a set stays on the webhook.
func takesFromApps(c *v1alpha1.SidecarContainer) string {
	switch {
	case c.ShareVolumePolicy != nil && c.ShareVolumePolicy.Type == v1alpha1.SharePolicyEnabled:
		return "shareVolumePolicy"
	case c.ShareVolumeDevicePolicy != nil && c.ShareVolumeDevicePolicy.Type == v1alpha1.SharePolicyEnabled:
		return "shareVolumeDevicePolicy"
	case len(c.TransferEnv) > 0:
		return "transferEnv"
	case c.ResourcesPolicy != nil:
		// Sums, maxima and rounding of quantities, per pod, are beyond
		// what a policy's CEL can write cleanly.
		return "resourcesPolicy"
	}
	return ""
}
