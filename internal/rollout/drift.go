package rollout

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/internal/imageref"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// RecordAdmitted returns state with every recorded image set to the one
// pod's spec carries, and whether that changed anything. The pod webhook
// calls it on a pod being created: nobody has edited it yet, so what later
// mutators made of an image is what was written, and no write is in flight
// (a record copied from a live pod loses its write). state is not modified.
func RecordAdmitted(state revision.State, pod *corev1.Pod) (revision.State, bool) {
	out := make(revision.State, len(state))
	changed := false
	for set, rec := range state {
		if rec.Write != nil {
			rec.Write, changed = nil, true
		}
		rec.Containers = append([]revision.ContainerState(nil), rec.Containers...)
		for i, rc := range rec.Containers {
			if spec, _, found := specContainer(pod, rc.Name); found && spec.Image != rc.Image {
				rec.Containers[i].Image = spec.Image
				changed = true
			}
			if written(rc) {
				rec.Containers[i] = settled(rec.Containers[i])
				changed = true
			}
		}
		out[set] = rec
	}
	return out, changed
}

// Rewrite is an image the apiserver stored in place of the one written.
type Rewrite struct {
	// Container is the sidecar's name in the pod.
	Container string
	// Written is the image written; Stored the one the apiserver stored.
	Written, Stored string
}

// RecordStored returns the record u wrote with, for each container u
// wrote, the image the apiserver stored instead when admission rewrote it
// into drift (a mirror by tag), and those rewrites: recorded as written,
// driftPolicy Revert would write it back, to be rewritten, for ever.
// stored is the pod the apiserver returned. u is not modified.
//
// Worked cases, u writes exporter:v1:
//
//	stored                        record                       rewrites
//	exporter:v1                   exporter:v1                  none
//	exporter:v1@sha256:aaa…       exporter:v1                  none: it means what was written
//	mirror.example/exporter:v1    mirror.example/exporter:v1   exporter:v1 as mirror.example/exporter:v1
func RecordStored(u PodUpdate, stored *corev1.Pod) (revision.SetState, []Rewrite) {
	rec := u.State
	rec.Containers = slices.Clone(rec.Containers)
	var rewrites []Rewrite
	for _, w := range u.Containers {
		spec, _, found := specContainer(stored, w.Name)
		if !found || imageref.Same(w.Image, spec.Image) {
			continue
		}
		rewrites = append(rewrites, Rewrite{Container: w.Name, Written: w.Image, Stored: spec.Image})
		for i := range rec.Containers {
			if rec.Containers[i].Name == w.Name {
				rec.Containers[i].Image = spec.Image
			}
		}
	}
	return rec, rewrites
}

// Rewritten names the running sidecars of p, on the latest revision, whose
// recorded image does not mean the declared one: admission's rewrite was
// recorded (RecordAdmitted, RecordStored).
func (p Pod) Rewritten(latest Latest) []string {
	if !p.Updated {
		return nil
	}
	var out []string
	for _, c := range p.Containers {
		image, declared := latest.Containers[c.Name]
		if c.Runs && c.Recorded.Hot == nil && declared && !imageref.Same(image, c.Recorded.Image) {
			out = append(out, c.Name)
		}
	}
	return out
}
