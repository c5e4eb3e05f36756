package inject

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// What a sidecar takes from the pod's app containers at injection:
// shareVolumePolicy, shareVolumeDevicePolicy and transferEnv.
//
// The app containers are the pod's regular containers that no SidecarSet
// injected: those no entry of the pod's record names, in the pod's order.
// Sidecars of other sets, injected earlier or in the same call, are not app
// containers, so what a sidecar gets does not depend on the order the sets
// are taken in. Init containers are not app containers either (OpenKruise
// takes regular containers only): an ordinary one has finished before the
// sidecar starts, and a native sidecar of the pod's own is a sidecar. A
// sidecar declared under initContainers takes from the app containers too.
//
// Shared mounts come after the sidecar's own, in the order of the app
// containers and of their mounts. A mount is skipped when its path (cleaned,
// so "/logs/" is "/logs") is one the sidecar already mounts or uses as a
// device, its own or shared from an earlier app container: the first wins,
// so of two app containers that mount different volumes at one path the
// sidecar gets the first's. It is skipped too when the sidecar uses its
// volume as a device (the apiserver refuses one volume as both in a
// container), and when its propagation is Bidirectional and the sidecar is
// not privileged (the apiserver refuses that). Devices are shared the same
// way, after the mounts: skipped at a path in use, or when the sidecar
// mounts their volume.
//
// Worked case: app containers a (mounts logs at /var/log, data at /data
// with subPathExpr $(POD)) and b (mounts cache at /var/log/, tmp at /tmp);
// the sidecar mounts its own conf at /tmp. It gets conf at /tmp, logs at
// /var/log, data at /data; cache at /var/log/ (the path a's mount took)
// and tmp (its own /tmp) are skipped.
//
// Copied environment variables (transferEnv, then those a shared mount's
// subPathExpr names) go before the sidecar's own env, so that its own can
// refer to them with $(NAME); a name the sidecar declares itself is never
// copied over it. A subPathExpr's variables are copied with those their
// values refer to, in the app container's order, which the kubelet needs to
// expand them. A variable from envFrom is not copied. A copied
// resourceFieldRef without containerName is given the source container's
// name: unset, it would name the sidecar's own resources.
//
// transferEnv never keeps a pod from being created: a source container
// that is not among the app containers, or a variable it does not declare,
// is left out with a warning.

// appContainers returns the pod's regular containers that no entry of
// state names.
func appContainers(pod *corev1.Pod, state revision.State) []*corev1.Container {
	var apps []*corev1.Container
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if !injectedBySet(state, c.Name, false) {
			apps = append(apps, c)
		}
	}
	return apps
}

// injectedBySet reports whether an entry of state names the container
// called name, among the init containers or the others as init says.
func injectedBySet(state revision.State, name string, init bool) bool {
	for _, entry := range state {
		for _, c := range entry.Containers {
			if c.Init == init && c.Name == name {
				return true
			}
		}
	}
	return false
}

// takesFromApps reports whether sc asks for anything of the app containers.
func takesFromApps(sc *v1alpha1.SidecarContainer) bool {
	return enabled(sc.ShareVolumePolicy) || enabled(sc.ShareVolumeDevicePolicy) || len(sc.TransferEnv) > 0
}

func enabled(p *v1alpha1.SharePolicy) bool {
	return p != nil && p.Type == v1alpha1.SharePolicyEnabled
}

// podFields is what a transferEnv fieldRef may read of a pod.
type podFields struct {
	pod       *corev1.Pod
	namespace string
}

// withApps returns sc's container with what it takes from apps, and
// warnings about what it asked for and could not get. The result shares
// nothing with sc.
func withApps(sc *v1alpha1.SidecarContainer, apps []*corev1.Container, pf podFields) (corev1.Container, []string) {
	var c corev1.Container
	sc.Container.DeepCopyInto(&c)
	copied, warnings := transferred(sc, apps, pf)
	if enabled(sc.ShareVolumePolicy) {
		copied = append(copied, shareMounts(&c, apps)...)
	}
	if enabled(sc.ShareVolumeDevicePolicy) {
		shareDevices(&c, apps)
	}
	var env []corev1.EnvVar
	for _, e := range copied {
		if !hasEnv(c.Env, e.Name) && !hasEnv(env, e.Name) {
			env = append(env, e)
		}
	}
	if len(env) > 0 {
		c.Env = append(env, c.Env...)
	}
	return c, warnings
}

// transferred returns deep copies of the variables sc's transferEnv names.
func transferred(sc *v1alpha1.SidecarContainer, apps []*corev1.Container, pf podFields) ([]corev1.EnvVar, []string) {
	var out []corev1.EnvVar
	var warnings []string
	for i, t := range sc.TransferEnv {
		where := fmt.Sprintf("container %q transferEnv[%d]", sc.Name, i)
		source := t.SourceContainerName
		if from := t.SourceContainerNameFrom; from != nil && from.FieldRef != nil {
			v, err := PodFieldValue(pf.pod, pf.namespace, from.FieldRef.FieldPath)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("%s: %v; nothing copied", where, err))
				continue
			}
			source = v
		}
		app := findApp(apps, source)
		if app == nil {
			warnings = append(warnings, fmt.Sprintf("%s: the pod has no app container named %q; nothing copied", where, source))
			continue
		}
		names := t.EnvNames
		if t.EnvName != "" {
			names = []string{t.EnvName}
		}
		for _, name := range names {
			e, ok := lastEnv(app.Env, name)
			if !ok {
				warnings = append(warnings, fmt.Sprintf("%s: app container %q has no environment variable %q; it is not copied", where, app.Name, name))
				continue
			}
			out = append(out, copiedEnv(e, app.Name))
		}
	}
	return out, warnings
}

// shareMounts appends to c the app containers' mounts it can take, and
// returns the variables their subPathExprs need.
func shareMounts(c *corev1.Container, apps []*corev1.Container) []corev1.EnvVar {
	used := usedPaths(c)
	devices := make(map[string]bool, len(c.VolumeDevices))
	for _, d := range c.VolumeDevices {
		devices[d.Name] = true
	}
	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	var env []corev1.EnvVar
	for _, app := range apps {
		var refs []string
		for _, m := range app.VolumeMounts {
			p := path.Clean(m.MountPath)
			bidirectional := m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional
			if used[p] || devices[m.Name] || bidirectional && !privileged {
				continue
			}
			used[p] = true
			var mc corev1.VolumeMount
			m.DeepCopyInto(&mc)
			c.VolumeMounts = append(c.VolumeMounts, mc)
			refs = append(refs, envRefs(m.SubPathExpr)...)
		}
		env = append(env, neededEnv(app, refs)...)
	}
	return env
}

// shareDevices appends to c the app containers' devices it can take.
func shareDevices(c *corev1.Container, apps []*corev1.Container) {
	used := usedPaths(c)
	mounted := make(map[string]bool, len(c.VolumeMounts))
	for _, m := range c.VolumeMounts {
		mounted[m.Name] = true
	}
	for _, app := range apps {
		for _, d := range app.VolumeDevices {
			p := path.Clean(d.DevicePath)
			if used[p] || mounted[d.Name] {
				continue
			}
			used[p] = true
			c.VolumeDevices = append(c.VolumeDevices, d)
		}
	}
}

// usedPaths returns the cleaned mount and device paths of c.
func usedPaths(c *corev1.Container) map[string]bool {
	used := make(map[string]bool, len(c.VolumeMounts)+len(c.VolumeDevices))
	for _, m := range c.VolumeMounts {
		used[path.Clean(m.MountPath)] = true
	}
	for _, d := range c.VolumeDevices {
		used[path.Clean(d.DevicePath)] = true
	}
	return used
}

// neededEnv returns, in app's order, copies of app's variables named in
// refs and of those their values refer to, each once.
func neededEnv(app *corev1.Container, refs []string) []corev1.EnvVar {
	if len(refs) == 0 {
		return nil
	}
	need := map[string]bool{}
	queue := refs
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if need[name] {
			continue
		}
		need[name] = true
		if e, ok := lastEnv(app.Env, name); ok {
			queue = append(queue, envRefs(e.Value)...)
		}
	}
	var out []corev1.EnvVar
	for i := range app.Env {
		e := app.Env[i]
		if need[e.Name] && !hasEnv(out, e.Name) {
			// The last declaration is the one the kubelet uses.
			last, _ := lastEnv(app.Env, e.Name)
			out = append(out, copiedEnv(last, app.Name))
		}
	}
	return out
}

// envRefs returns the names s refers to as $(NAME), the kubelet's
// expansion syntax, in which $$ stands for a literal $.
func envRefs(s string) []string {
	var refs []string
	for i := 0; i < len(s)-1; i++ {
		if s[i] != '$' {
			continue
		}
		switch s[i+1] {
		case '$':
			i++
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				refs = append(refs, s[i+2:i+2+end])
				i += 2 + end
			}
		}
	}
	return refs
}

func findApp(apps []*corev1.Container, name string) *corev1.Container {
	for _, a := range apps {
		if a.Name == name {
			return a
		}
	}
	return nil
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	return slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == name })
}

// lastEnv returns the last variable of env named name: of duplicates, the
// kubelet uses the last.
func lastEnv(env []corev1.EnvVar, name string) (corev1.EnvVar, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if env[i].Name == name {
			return env[i], true
		}
	}
	return corev1.EnvVar{}, false
}

// copiedEnv returns a deep copy of e as it means the same in another
// container than source.
func copiedEnv(e corev1.EnvVar, source string) corev1.EnvVar {
	var out corev1.EnvVar
	e.DeepCopyInto(&out)
	if r := out.ValueFrom; r != nil && r.ResourceFieldRef != nil && r.ResourceFieldRef.ContainerName == "" {
		r.ResourceFieldRef.ContainerName = source
	}
	return out
}

// PodFieldValue returns the value of the field of pod that fieldPath
// names, for a transferEnv's sourceContainerNameFrom: metadata.name,
// metadata.namespace (namespace, as the pod's own may be empty at
// admission), metadata.labels['KEY'] or metadata.annotations['KEY']. A pod
// created from generateName has no name yet when it is injected. Any other
// path is an error, and so is a value that is empty.
func PodFieldValue(pod *corev1.Pod, namespace, fieldPath string) (string, error) {
	var v string
	switch fieldPath {
	case "metadata.name":
		v = pod.Name
	case "metadata.namespace":
		v = namespace
	default:
		m, key, ok := subscript(fieldPath)
		if !ok {
			return "", fmt.Errorf("fieldPath %q is not supported: use metadata.name, metadata.namespace, metadata.labels['KEY'] or metadata.annotations['KEY']", fieldPath)
		}
		if m == "labels" {
			v = pod.Labels[key]
		} else {
			v = pod.Annotations[key]
		}
	}
	if v == "" {
		return "", fmt.Errorf("fieldPath %q is empty in the pod", fieldPath)
	}
	return v, nil
}

// subscript splits metadata.labels['KEY'] and metadata.annotations['KEY'].
func subscript(fieldPath string) (string, string, bool) {
	for _, m := range []string{"labels", "annotations"} {
		rest, ok := strings.CutPrefix(fieldPath, "metadata."+m+"['")
		if !ok {
			continue
		}
		key, ok := strings.CutSuffix(rest, "']")
		if !ok || key == "" || strings.ContainsAny(key, "'[]") {
			return "", "", false
		}
		return m, key, true
	}
	return "", "", false
}

// PodFieldPathSupported reports whether PodFieldValue can read fieldPath.
func PodFieldPathSupported(fieldPath string) bool {
	if fieldPath == "metadata.name" || fieldPath == "metadata.namespace" {
		return true
	}
	_, _, ok := subscript(fieldPath)
	return ok
}
