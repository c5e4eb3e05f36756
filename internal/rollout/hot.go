package rollout

import (
	"slices"

	"github.com/sidecarset/sidecarset/internal/revision"
)

// A HotUpgrade sidecar runs in a pod as two slots (revision.HotSlot): one
// serves, the other idles on the empty image. An update to a new image T
// takes three writes, each of one slot, each waited for like any in-place
// write:
//
//  1. the idle slot gets T, as the next version: the kubelet starts it
//     beside the serving one, and it takes over (SIDECARSET_VERSION >
//     SIDECARSET_VERSION_ALT > 0 tells it to);
//  2. once the next slot is complete and its container Ready (it has
//     taken over), the old one gets the empty image (a handoff,
//     ActionHandoff when no update is due);
//  3. none: the update is complete once the kubelet restarted the old
//     slot on the empty image.
//
// The pod is not Ready for the rollout from the first write until the
// last is complete, so a pod written while ready holds one of
// maxUnavailable, and its budgets, through the whole of it. One written
// while not ready, and counted since it turned ready
// (ActionRecordDisruption), is recorded back once its first write is done
// (Pod.BackButOwed): its handoff takes a slot of its own.
//
// A newer T2 written during step 1, while the next slot has not taken
// over, goes into the next slot again (the serving one is left alone); a T
// equal to the serving slot's image (an undo) sends the next slot back to
// the empty image. Once the next slot has taken over, its handoff comes
// first, whatever the target: the old version has given its work up, and
// emptying or restarting the next one would leave nothing serving. A
// newer target or an undo then goes into the emptied slot as a hot
// upgrade of its own. A hand edit of the next slot ends its upgrade: the
// pod is drifted, and nothing waits for it (upgrading).
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

// hotPair is one HotUpgrade sidecar's slots in a pod, by their index in
// the pod's record.
type hotPair struct {
	of string
	// serving is the slot that serves; next is the other one.
	serving, next int
}

// hotPairs returns the HotUpgrade sidecars recorded in rec, in record
// order.
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

// upgrading reports whether the pair's next slot holds a version beside the
// serving one, as written: an upgrade is under way. A hand edit of the
// next slot ends it, as it ends any write in flight.
func (h hotPair) upgrading(p Pod) bool {
	next := p.Record.Containers[h.next]
	c, ok := p.container(next.Name)
	return next.Hot.Version != 0 && ok && SameImage(next.Image, c.Image)
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
		// The old version has given its work up: whatever the target,
		// it only idles now, and the next one is the one to keep. A write
		// of the old slot still in flight (a drift revert) goes first: a
		// status of the handoff's spec could show its container. Unless
		// the kubelet tried it and could not start it (an image that does
		// not pull): waiting for it could hold the pod for ever.
		if !s.InFlight || s.stuck() {
			return s.Name, hotWrite{empty, 0}, true
		}
	case SameImage(target, s.Image):
		if !SameImage(empty, n.Image) || next.Hot.Version != 0 {
			return n.Name, hotWrite{empty, 0}, true
		}
	case !SameImage(target, n.Image) || next.Hot.Version == 0:
		return n.Name, hotWrite{target, serving.Hot.Version + 1}, true
	}
	return "", hotWrite{}, false
}

// stuck reports whether c's write in flight is one the kubelet acted on
// and could not start: c waits to start, its status showing the image
// written.
func (c Container) stuck() bool {
	return c.InFlight && c.StartFailed && SameImage(c.StatusImage, c.Recorded.Image)
}

// handedOver reports whether a next slot has taken over: it runs what was
// written into it, and its container is Ready. A status that does not
// show the written image yet is of the container before it (the idle
// one, ready on the empty image).
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

// handoffsOwed returns the HotUpgrade sidecars of p whose next slot has
// taken over while the old one still serves, in record order.
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

// withHot returns rc with the slot written as w: its image and version.
// The record's HotSlot is shared with the cache; it is replaced, never
// modified.
func withHot(rc revision.ContainerState, w hotWrite) revision.ContainerState {
	rc.Image = w.image
	slot := *rc.Hot
	slot.Version = w.version
	rc.Hot = &slot
	return rc
}

// handoffOf writes the empty image into the old slot of each sidecar of
// p whose next slot has taken over: the last step of a hot upgrade, when
// no update of the pod is due.
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
