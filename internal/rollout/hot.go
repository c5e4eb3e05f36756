package rollout

import (
	"slices"

	"github.com/sidecarset/sidecarset/internal/imageref"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// A HotUpgrade sidecar runs as two slots (revision.HotSlot): one serves,
// the other idles on the empty image. An update to image T writes one slot
// at a time, each waited for: the idle slot gets T as the next version,
// which starts beside the serving one and takes over; once it is complete
// and Ready, the old slot gets the empty image (the handoff). The pod is
// not Ready for the rollout until then. Before the takeover, a newer target
// goes into the next slot again, and an undo empties it; after, the
// handoff comes first whatever the target, as emptying the next would
// leave nothing serving. A hand edit of the next slot ends its upgrade.
//
// Worked cases, slots p-1 and p-2, target T, empty image E:
//
//	p-1 v1 "a" serving, p-2 v0 E        T "b" → p-2 gets "b" as v2
//	p-1 v1 "a", p-2 v2 "b" starting     T "b" → nothing: p-2 in flight
//	p-1 v1 "a", p-2 v2 "b" ready        T "b" → p-1 gets E as v0 (handoff)
//	p-1 v1 "a", p-2 v2 "b" ready        T "c" → p-1 gets E as v0 (handoff first)
//	p-1 v1 "a", p-2 v2 "b" starting     T "c" → p-2 gets "c" as v2
//	p-1 v1 "a", p-2 v2 "b" starting     T "a" → p-2 gets E as v0 (undo)
//	p-1 v0 E, p-2 v2 "b" serving        T "b" → nothing: complete
//	p-1 v0 E, p-2 v2 "b" serving        T "b", E2 → p-1 gets E2

// hotPair is one HotUpgrade sidecar's slots, by index in the pod's record.
type hotPair struct {
	of string
	// serving is the slot that serves; next is the other one.
	serving, next int
}

// hotPairs returns the HotUpgrade sidecars recorded in rec, in order.
func hotPairs(rec revision.SetState) []hotPair {
	var out []hotPair
	for i, a := range rec.Containers {
		if a.Hot == nil {
			continue
		}
		for j := i + 1; j < len(rec.Containers); j++ {
			b := rec.Containers[j]
			if b.Hot == nil || b.Hot.Of != a.Hot.Of {
				continue
			}
			// The lower version above 0 serves.
			p := hotPair{of: a.Hot.Of, serving: i, next: j}
			if a.Hot.Version == 0 || (b.Hot.Version != 0 && b.Hot.Version < a.Hot.Version) {
				p.serving, p.next = j, i
			}
			out = append(out, p)
		}
	}
	return out
}

// upgrading reports whether the pair's next slot holds a version beside
// the serving one, as written; a hand edit of it ends the upgrade.
func (h hotPair) upgrading(p Pod) bool {
	next := p.Record.Containers[h.next]
	c, ok := p.container(next.Name)
	return next.Hot.Version != 0 && ok && imageref.Same(next.Image, c.Image)
}

// hotWrite is an image and version for one slot.
type hotWrite struct {
	image   string
	version int64
}

// step returns the write the pair's sidecar needs next in p, towards
// target with the empty image empty (see the worked cases above), keyed
// by slot name; none while it waits, or when it is done.
func (h hotPair) step(p Pod, target, empty string) (string, hotWrite, bool) {
	rec := p.Record
	serving, next := rec.Containers[h.serving], rec.Containers[h.next]
	s, sok := p.container(serving.Name)
	n, nok := p.container(next.Name)
	switch {
	case !sok || !nok:
	case next.Hot.Version != 0 && n.handedOver():
		// The old version gave its work up; a write of its slot in
		// flight goes first, unless the kubelet could not start it.
		if !s.InFlight || s.stuck() {
			return s.Name, hotWrite{empty, 0}, true
		}
	case imageref.Same(target, s.Image):
		if !imageref.Same(empty, n.Image) || next.Hot.Version != 0 {
			return n.Name, hotWrite{empty, 0}, true
		}
	case !imageref.Same(target, n.Image) || next.Hot.Version == 0:
		return n.Name, hotWrite{target, serving.Hot.Version + 1}, true
	}
	return "", hotWrite{}, false
}

// stuck reports whether the kubelet acted on c's write and could not start it.
func (c Container) stuck() bool {
	return c.InFlight && c.StartFailed && imageref.Same(c.StatusImage, c.Recorded.Image)
}

// handedOver reports whether a next slot has taken over: Complete, Ready,
// showing the written image (before, its status is the idle container's).
func (c Container) handedOver() bool {
	return c.Complete && c.Running && c.Ready && c.shows(c.Recorded.Image)
}

// hotSteps returns the writes p's HotUpgrade sidecars need towards the
// images of latest, by slot name. A sidecar latest no longer declares as
// HotUpgrade gets none: the pod needs a recreate.
func hotSteps(p Pod, latest Latest) map[string]hotWrite {
	var out map[string]hotWrite
	for _, h := range hotPairs(p.Record) {
		empty, hot := latest.Hot[h.of]
		if !hot {
			continue
		}
		if name, w, ok := h.step(p, latest.Containers[h.of], empty); ok {
			if out == nil {
				out = map[string]hotWrite{}
			}
			out[name] = w
		}
	}
	return out
}

// handoffsOwed returns the HotUpgrade sidecars of p that owe a handoff.
func handoffsOwed(p Pod) []string {
	var out []string
	for _, h := range hotPairs(p.Record) {
		if !h.upgrading(p) {
			continue
		}
		if n, ok := p.container(p.Record.Containers[h.next].Name); ok && n.handedOver() {
			out = append(out, h.of)
		}
	}
	return out
}

// withHot returns rc with the slot written as w. The record's HotSlot is
// shared with the cache: it is replaced, never modified.
func withHot(rc revision.ContainerState, w hotWrite) revision.ContainerState {
	rc.Image = w.image
	slot := *rc.Hot
	slot.Version = w.version
	rc.Hot = &slot
	return rc
}

// handoffOf writes the empty image into the old slot of each sidecar of p
// whose next slot has taken over, when no update of the pod is due.
func handoffOf(p Pod, latest Latest) PodUpdate {
	u := PodUpdate{Pod: p.Key, Action: ActionHandoff, State: p.Record}
	u.State.Containers = nil
	steps := hotSteps(p, latest)
	for _, rc := range p.Record.Containers {
		c, _ := p.container(rc.Name)
		if w, ok := steps[rc.Name]; ok && w.version == 0 && slices.Contains(p.HandoffOwed, rc.Hot.Of) {
			rc = withHot(written1(c, rc), w)
			u.Containers = append(u.Containers, ContainerImage{Name: c.Name, Init: c.Init, Image: w.image})
		} else if c.Complete {
			rc = settled(rc)
		}
		u.State.Containers = append(u.State.Containers, rc)
	}
	u.State.Write = writeOf(p, u)
	return u
}
