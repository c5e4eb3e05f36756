package webhook

import (
	"fmt"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

// podPatch returns the JSON patch that makes injected out of original,
// written from what injection does to a pod (internal/inject): sidecars put
// before and after the pod's own containers and init containers, volumes
// and image pull secrets appended, annotations and labels written or
// removed. Nothing else of the pod is read or named, so the patch holds
// only what injection wrote, and the rest of the request's pod, fields this
// version of the API does not know included, stays as its creator sent it.
//
// It returns an error when injected is not of that shape (own containers
// reordered, a list shortened): that would be a bug in injection, and the
// caller then diffs the two pods instead.
//
// Worked case: own containers [app], injected [proxy, app, exporter], no
// init containers before, one after; annotations absent before:
//
//	add /spec/containers/0 proxy
//	add /spec/containers/- exporter
//	add /spec/initContainers [log-shipper]
//	add /metadata/annotations {sidecarset.dev/injected: ..., ...}
func podPatch(original, injected *corev1.Pod) ([]jsonpatch.Operation, error) {
	var ops []jsonpatch.Operation
	for _, l := range []struct {
		path     string
		orig, in []corev1.Container
	}{
		{"/spec/containers", original.Spec.Containers, injected.Spec.Containers},
		{"/spec/initContainers", original.Spec.InitContainers, injected.Spec.InitContainers},
	} {
		more, err := aroundOps(l.path, l.orig, l.in)
		if err != nil {
			return nil, err
		}
		ops = append(ops, more...)
	}
	more, err := appendOps("/spec/volumes", original.Spec.Volumes, injected.Spec.Volumes,
		func(a, b *corev1.Volume) bool { return a.Name == b.Name })
	if err != nil {
		return nil, err
	}
	ops = append(ops, more...)
	more, err = appendOps("/spec/imagePullSecrets", original.Spec.ImagePullSecrets, injected.Spec.ImagePullSecrets,
		func(a, b *corev1.LocalObjectReference) bool { return *a == *b })
	if err != nil {
		return nil, err
	}
	ops = append(ops, more...)
	ops = append(ops, mapOps("/metadata/annotations", original.Annotations, injected.Annotations)...)
	ops = append(ops, mapOps("/metadata/labels", original.Labels, injected.Labels)...)
	return ops, nil
}

// aroundOps adds the containers of in before and after own, which in must
// hold unchanged, in order, by name.
func aroundOps(path string, own, in []corev1.Container) ([]jsonpatch.Operation, error) {
	if len(in) == len(own) {
		return nil, nil
	}
	if len(own) == 0 {
		// Absent, null or empty: the whole list.
		return []jsonpatch.Operation{jsonpatch.NewOperation("add", path, in)}, nil
	}
	k := slices.IndexFunc(in, func(c corev1.Container) bool { return c.Name == own[0].Name })
	if k < 0 || k+len(own) > len(in) {
		return nil, fmt.Errorf("%s: the pod's own containers are not among the injected ones", path)
	}
	for i := range own {
		if in[k+i].Name != own[i].Name {
			return nil, fmt.Errorf("%s: container %d is %q, not the pod's %q", path, k+i, in[k+i].Name, own[i].Name)
		}
	}
	ops := make([]jsonpatch.Operation, 0, len(in)-len(own))
	for i := range k {
		// Each add moves the pod's containers one further.
		ops = append(ops, jsonpatch.NewOperation("add", fmt.Sprintf("%s/%d", path, i), &in[i]))
	}
	for i := k + len(own); i < len(in); i++ {
		ops = append(ops, jsonpatch.NewOperation("add", path+"/-", &in[i]))
	}
	return ops, nil
}

// appendOps adds what in holds after own, which it must begin with.
func appendOps[T any](path string, own, in []T, same func(a, b *T) bool) ([]jsonpatch.Operation, error) {
	if len(in) < len(own) {
		return nil, fmt.Errorf("%s: %d entries, fewer than the pod's %d", path, len(in), len(own))
	}
	for i := range own {
		if !same(&own[i], &in[i]) {
			return nil, fmt.Errorf("%s: entry %d changed", path, i)
		}
	}
	if len(in) == len(own) {
		return nil, nil
	}
	if len(own) == 0 {
		return []jsonpatch.Operation{jsonpatch.NewOperation("add", path, in)}, nil
	}
	ops := make([]jsonpatch.Operation, 0, len(in)-len(own))
	for i := len(own); i < len(in); i++ {
		ops = append(ops, jsonpatch.NewOperation("add", path+"/-", &in[i]))
	}
	return ops, nil
}

// mapOps writes the keys of in that own lacks or holds otherwise, and
// removes those in lacks, in key order.
func mapOps(path string, own, in map[string]string) []jsonpatch.Operation {
	if len(own) == 0 {
		if len(in) == 0 {
			return nil
		}
		return []jsonpatch.Operation{jsonpatch.NewOperation("add", path, in)}
	}
	var ops []jsonpatch.Operation
	for _, k := range sortedKeys(in) {
		if v, ok := own[k]; !ok || v != in[k] {
			// add sets a member that exists too.
			ops = append(ops, jsonpatch.NewOperation("add", path+"/"+escapePointer(k), in[k]))
		}
	}
	for _, k := range sortedKeys(own) {
		if _, ok := in[k]; !ok {
			ops = append(ops, jsonpatch.NewOperation("remove", path+"/"+escapePointer(k), nil))
		}
	}
	return ops
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// pointerEscaper escapes a key for a JSON pointer (RFC 6901): an
// annotation's key holds a "/".
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapePointer(key string) string { return pointerEscaper.Replace(key) }
