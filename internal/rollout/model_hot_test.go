package rollout_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
	"github.com/sidecarset/sidecarset/internal/status"
)

// Cases TestModel found with HotUpgrade sidecars, kept as they were found:
// a set with the sidecar "proxy" upgraded hot, idling on empty:v1, and pods
// whose kubelet, as the model's, publishes a sync's status before acting on
// the spec.
func TestModelHotKept(t *testing.T) {
	t.Run("a handoff waits for the next slot to run the image written into it", func(t *testing.T) {
		// Found by TestModel (a scale-up): the step-1 write went into a pod
		// whose kubelet had reported no container yet, so its record
		// names no previous container and any container that runs
		// completes it. The kubelet's next status shows the containers it
		// started from the spec before the write: proxy-2 on the empty
		// image, ready. It was taken for the next version having taken
		// over, and the serving slot got the empty image: no slot runs the
		// sidecar (for good, had the new image crashed).
		v1, v2 := keptHotSet("proxy:v1", 1), keptHotSet("proxy:v2", 1)
		pod := keptHotPod("p01", v1)
		report(pod, false, creating("app"), creating("proxy-1"), creating("proxy-2"))
		plan := keptNext(t, v2, pod)
		if len(plan.Updates) != 1 || !writes(plan.Updates[0], "proxy-2", "proxy:v2") {
			t.Fatalf("updates %+v, want proxy:v2 written into proxy-2", plan.Updates)
		}
		pod = keptApply(t, pod, v2, plan.Updates[0])
		report(pod, true, running("app", 1, "mysql:8", true), running("proxy-1", 2, "proxy:v1", true),
			running("proxy-2", 3, "empty:v1", true))
		for _, u := range keptNext(t, v2, pod).Updates {
			if writes(u, "proxy-1", "empty:v1") {
				t.Errorf("%s writes empty:v1 into proxy-1, which serves, while proxy-2 runs empty:v1", u.Action)
			}
		}
	})
	t.Run("a handoff owed goes before the next update while another set has the pod down", func(t *testing.T) {
		// Found by TestModel (-rapid.seed=1600674702162714552): a newer
		// revision was due in a pod whose hot upgrade owed its handoff,
		// so the update began with the handoff; the pod was not ready,
		// down for its crashing sidecar and for another set's write. The
		// handoff, which goes over any other set's disruption, was held
		// as an update: the other set waited for the pod to turn ready,
		// and this set for the other set.
		v1, v2, v3 := keptHotSet("proxy:v1", 1), keptHotSet("proxy:v2", 1), keptHotSet("proxy:v3", 1)
		pod := nextStarted(t, v1, v2, false)
		latest := rollout.NewLatest(v3)
		p := rollout.Classify(pod, keptRecord(t, pod), latest)
		if len(p.HandoffOwed) == 0 {
			t.Fatalf("no handoff owed in %+v", p)
		}
		p.DisruptedBy = []string{"other"}
		plan, err := rollout.Next(rollout.Input{Latest: latest, Pods: []rollout.Pod{p}, Strategy: v3.Spec.UpdateStrategy})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Updates) != 1 || plan.Updates[0].Action != rollout.ActionHandoff || !writes(plan.Updates[0], "proxy-1", "empty:v1") {
			t.Fatalf("plan %v (held %+v), want the handoff of proxy-1", actions(plan), plan.Held)
		}
	})
	t.Run("the fix of a failing sidecar goes over another set's disruption", func(t *testing.T) {
		// Found by TestModel (-rapid.seed=20261210, case 3065): a pod
		// created with a sidecar whose image fails a while after it is
		// ready was written by another set while it was ready, and never
		// came back for that set. The fix, a new image for the idle slot,
		// was held for the other set's rollout, which waited for the pod
		// to turn ready: the other set stalled, this one waited for ever.
		v1, v2 := keptHotSet("proxy-fails-late:v1", 1), keptHotSet("proxy:v2", 1)
		pod := keptHotPod("p01", v1)
		report(pod, false, running("app", 1, "mysql:8", true), running("proxy-1", 2, "proxy-fails-late:v1", false),
			running("proxy-2", 3, "empty:v1", true))
		latest := rollout.NewLatest(v2)
		p := rollout.Classify(pod, keptRecord(t, pod), latest)
		p.DisruptedBy = []string{"other"}
		plan, err := rollout.Next(rollout.Input{Latest: latest, Pods: []rollout.Pod{p}, Strategy: v2.Spec.UpdateStrategy})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Updates) != 1 || !writes(plan.Updates[0], "proxy-2", "proxy:v2") {
			t.Fatalf("plan %v (held %+v), want proxy:v2 written into proxy-2", actions(plan), plan.Held)
		}
	})
	t.Run("a handoff owed goes before the next update while the rollout is paused", func(t *testing.T) {
		// As a handoff owed alone does: held, the pod would stay
		// halfway through its hot upgrade for as long as the pause.
		v1, v2, v3 := keptHotSet("proxy:v1", 1), keptHotSet("proxy:v2", 1), keptHotSet("proxy:v3", 1)
		v3.Spec.UpdateStrategy.Paused = true
		pod := nextStarted(t, v1, v2, true)
		plan := keptNext(t, v3, pod)
		if len(plan.Updates) != 1 || plan.Updates[0].Action != rollout.ActionHandoff || !writes(plan.Updates[0], "proxy-1", "empty:v1") {
			t.Fatalf("plan %v (held %+v), want the handoff of proxy-1", actions(plan), plan.Held)
		}
	})
	t.Run("a rollout with a handoff owed is not complete", func(t *testing.T) {
		// Found by TestModel: in a pod that is not ready (its app never
		// is), the next slot took over; the rollout was called complete
		// while the handoff was still to write, and the handoff and its
		// settle came after: the status went from Complete back to
		// Progressing and Complete again.
		v1, v2 := keptHotSet("proxy:v1", 1), keptHotSet("proxy:v2", 1)
		pod := nextStarted(t, v1, v2, false)
		latest := rollout.NewLatest(v2)
		pods := []rollout.Pod{rollout.Classify(pod, keptRecord(t, pod), latest)}
		plan, err := rollout.Next(rollout.Input{Latest: latest, Pods: pods, Strategy: v2.Spec.UpdateStrategy})
		if err != nil {
			t.Fatal(err)
		}
		res := status.Compute(status.Input{Generation: v2.Generation, Latest: latest, Pods: pods, Plan: plan,
			Strategy: v2.Spec.UpdateStrategy, Now: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
		if len(pods[0].HandoffOwed) > 0 && isTrue(res.Status.Conditions, v1alpha1.ConditionComplete) {
			t.Errorf("Complete with the handoff of %v owed (plan %v)", pods[0].HandoffOwed, actions(plan))
		}
	})
	t.Run("handoffs over maxUnavailable since RecordDisruption go one at a time", func(t *testing.T) {
		// Found by TestModel: p02, not ready yet, took its step-1 write
		// for free; seen ready before the kubelet acted, it was recorded as
		// a disruption, beyond maxUnavailable, and so stayed once ready
		// again, its hot upgrade under way. Its handoff, which restarts a
		// running slot of a ready pod, then went for free too, beside
		// p01's: two ready pods restarted at once under maxUnavailable 1.
		// Holding every handoff while the count is over maxUnavailable
		// instead holds both for good, unless p02, which the rollout took
		// no slot for, counts no more once it serves again (it has, for
		// minReadySeconds 0: the plans here read no clock).
		v1, v2 := keptHotSet("proxy:v1", 1), keptHotSet("proxy:v2", 1)
		v2.Spec.UpdateStrategy.MinReadySeconds = ptr.To[int32](0)
		p01, p02 := keptHotPod("p01", v1), keptHotPod("p02", v1)
		report(p01, true, running("app", 1, "mysql:8", true), running("proxy-1", 2, "proxy:v1", true),
			running("proxy-2", 3, "empty:v1", true))
		report(p02, false, running("app", 11, "mysql:8", false), running("proxy-1", 12, "proxy:v1", true),
			running("proxy-2", 13, "empty:v1", true))
		plan := keptNext(t, v2, p01, p02)
		if got := actions(plan); !slices.Equal(got, []string{"p02 Update", "p01 Update"}) {
			t.Fatalf("plan %v, want both pods updated (p02 for free)", got)
		}
		p02, p01 = keptApply(t, p02, v2, plan.Updates[0]), keptApply(t, p01, v2, plan.Updates[1])
		// p02 turns ready before the kubelet acts on the write.
		report(p02, true, running("app", 11, "mysql:8", true), running("proxy-1", 12, "proxy:v1", true),
			running("proxy-2", 13, "empty:v1", true))
		plan = keptNext(t, v2, p01, p02)
		if i := slices.Index(actions(plan), "p02 RecordDisruption"); i < 0 {
			t.Fatalf("plan %v, want p02's disruption recorded", actions(plan))
		} else {
			p02 = keptApply(t, p02, v2, plan.Updates[i])
		}
		// The kubelet restarts both next slots, which take over.
		report(p01, true, running("app", 1, "mysql:8", true), running("proxy-1", 2, "proxy:v1", true),
			running("proxy-2", 4, "proxy:v2", true))
		report(p02, true, running("app", 11, "mysql:8", true), running("proxy-1", 12, "proxy:v1", true),
			running("proxy-2", 14, "proxy:v2", true))
		plan = keptNext(t, v2, p01, p02)
		var restarts []string
		for _, u := range plan.Updates {
			if len(u.Containers) > 0 {
				restarts = append(restarts, u.Pod.Name)
			}
		}
		if len(restarts) > 1 {
			t.Errorf("plan %v restarts a running sidecar of the ready pods %v at once, maxUnavailable 1", actions(plan), restarts)
		}
		// Nor may both wait: neither pod is back before its handoff is
		// done, and nothing else frees a slot.
		if len(restarts) == 0 {
			t.Errorf("plan %v hands off neither pod (held %+v): neither hot upgrade can end", actions(plan), plan.Held)
		}
	})
	t.Run("two pods counted since they turned ready, each owing its handoff: one goes", func(t *testing.T) {
		// Found by TestModel (-rapid.seed=80602): both pods, written for
		// free while not ready, turned ready before the kubelet acted and
		// were counted, two over maxUnavailable 1, in no slot the rollout
		// took. Each handoff waited for room the other kept: neither hot
		// upgrade could end, and the rollout stalled. Serving again, owing
		// only the handoff, such a pod counts no more; its handoff takes
		// a slot. (minReadySeconds 0: the plans here read no clock.)
		v1, v2 := keptHotSet("proxy:v1", 1), keptHotSet("proxy:v2", 1)
		v2.Spec.UpdateStrategy.MinReadySeconds = ptr.To[int32](0)
		p01, p02 := keptHotPod("p01", v1), keptHotPod("p02", v1)
		// Both pods report ready or not, proxy-2 running image as container n.
		both := func(ready bool, n int, image string) {
			for i, pod := range []*corev1.Pod{p01, p02} {
				report(pod, ready, running("app", 10*i+1, "mysql:8", ready), running("proxy-1", 10*i+2, "proxy:v1", true),
					running("proxy-2", 10*i+n, image, true))
			}
		}
		both(false, 3, "empty:v1")
		plan := keptNext(t, v2, p01, p02)
		if got := actions(plan); !slices.Equal(got, []string{"p01 Update", "p02 Update"}) {
			t.Fatalf("plan %v, want both pods updated for free", got)
		}
		p01, p02 = keptApply(t, p01, v2, plan.Updates[0]), keptApply(t, p02, v2, plan.Updates[1])
		both(true, 3, "empty:v1")
		plan = keptNext(t, v2, p01, p02)
		if got := actions(plan); !slices.Equal(got, []string{"p01 RecordDisruption", "p02 RecordDisruption"}) {
			t.Fatalf("plan %v, want both pods' disruptions recorded", got)
		}
		p01, p02 = keptApply(t, p01, v2, plan.Updates[0]), keptApply(t, p02, v2, plan.Updates[1])
		both(true, 4, "proxy:v2")
		plan = keptNext(t, v2, p01, p02)
		if got := actions(plan); !slices.Equal(got, []string{"p01 Handoff"}) {
			t.Errorf("plan %v (held %+v), want p01 handed off, and p02 after it", got, plan.Held)
		}
	})
	t.Run("a write over a revert in flight is not completed by the revert's container", func(t *testing.T) {
		// Found by TestModel: proxy-1, the serving slot, was set by hand
		// to an image that does not pull, and reverted; the status, from
		// before the kubelet acted, still showed it waiting, so the
		// handoff went over the revert in flight and kept the container
		// before it as the one to see replaced. The kubelet's next status
		// shows the revert's container running proxy:v1, which the kubelet
		// is about to replace with empty:v1: it was taken for the
		// handoff's, the pod for back, and its maxUnavailable slot went to
		// another pod while it restarted. (Any write over a write in
		// flight whose container did not run yet is judged so; the
		// handoff now waits for the write in flight.)
		v1 := keptHotSet("proxy:v1", 1)
		v2 := keptHotSet("proxy:v2", 1)
		v2.Spec.DriftPolicy = v1alpha1.DriftRevert
		pod := nextStarted(t, v1, v2, true)
		var plan rollout.Plan
		// The hand edit, and the kubelet failing to pull it.
		pod.Spec.Containers[1].Image = "proxy-pull-fails:by-hand"
		pod.Generation++
		report(pod, false, running("app", 1, "mysql:8", true), pulling("proxy-1", "proxy-pull-fails:by-hand", 2, "proxy:v1"),
			running("proxy-2", 4, "proxy:v2", true))
		plan = keptNext(t, v2, pod)
		if len(plan.Updates) != 1 || plan.Updates[0].Action != rollout.ActionRevertDrift {
			t.Fatalf("plan %v, want the revert", actions(plan))
		}
		pod = keptApply(t, pod, v2, plan.Updates[0])
		// The kubelet reports the reverted spec before acting on it.
		report(pod, false, running("app", 1, "mysql:8", true), pulling("proxy-1", "proxy-pull-fails:by-hand", 2, "proxy:v1"),
			running("proxy-2", 4, "proxy:v2", true))
		// The handoff waits for the revert in flight, whose container
		// could otherwise be taken for its own.
		for _, u := range keptNext(t, v2, pod).Updates {
			if writes(u, "proxy-1", "empty:v1") {
				t.Fatalf("%s writes the handoff over the revert in flight", u.Action)
			}
		}
		// The kubelet starts the revert's container; then the handoff.
		report(pod, true, running("app", 1, "mysql:8", true), running("proxy-1", 5, "proxy:v1", true),
			running("proxy-2", 4, "proxy:v2", true))
		plan = keptNext(t, v2, pod)
		if len(plan.Updates) != 1 || !writes(plan.Updates[0], "proxy-1", "empty:v1") {
			t.Fatalf("plan %v, want the handoff", actions(plan))
		}
		pod = keptApply(t, pod, v2, plan.Updates[0])
		// The kubelet reports the handoff's spec before acting on it.
		report(pod, true, running("app", 1, "mysql:8", true), running("proxy-1", 5, "proxy:v1", true),
			running("proxy-2", 4, "proxy:v2", true))
		p := rollout.Classify(pod, keptRecord(t, pod), rollout.NewLatest(v2))
		for _, c := range p.Containers {
			if c.Name == "proxy-1" && c.Complete {
				t.Errorf("proxy-1 complete running proxy:v1 (%s), written empty:v1 (pod Ready %v, Back %v)", c.ContainerID, p.Ready, p.Back)
			}
		}
	})
	t.Run("an update waits for a handoff held by a revert in flight", func(t *testing.T) {
		// Found by TestModel: proxy-2 had taken over; proxy-1, set by hand
		// and reverted, had the revert in flight, so the handoff waited.
		// The set declared a new image of another sidecar: the update
		// recorded the latest revision and wrote no hot step, the handoff
		// came after, and the hot sidecar stayed on proxy:v2, the pod
		// counted as updated.
		v1, v2 := keptHotSet("proxy:v1", 1), keptHotSet("proxy:v2", 1)
		v2.Spec.DriftPolicy = v1alpha1.DriftRevert
		pod := nextStarted(t, v1, v2, true)
		pod = revertedHandEdit(t, v2, pod, "proxy-pull-fails:by-hand", true, running("app", 1, "mysql:8", true),
			pulling("proxy-1", "proxy-pull-fails:by-hand", 2, "proxy:v1"), running("proxy-2", 4, "proxy:v2", true))
		// The kubelet reports the reverted spec before acting on it.
		report(pod, true, running("app", 1, "mysql:8", true), pulling("proxy-1", "proxy-pull-fails:by-hand", 2, "proxy:v1"),
			running("proxy-2", 4, "proxy:v2", true))
		v3 := keptHotSet("proxy:v3", 1)
		v3.Spec.DriftPolicy = v1alpha1.DriftRevert
		plan := keptNext(t, v3, pod)
		for _, u := range plan.Updates {
			if u.Action == rollout.ActionUpdate && !writes(u, "proxy-1", "proxy:v3") && !writes(u, "proxy-2", "proxy:v3") {
				t.Errorf("%s records %s and writes %v: proxy:v3 never reaches the pod", u.Action, u.State.Revision, u.Containers)
			}
		}
	})
	t.Run("a handoff goes over a revert of the old slot that never runs", func(t *testing.T) {
		// Found by TestModel: a pod injected with an image that does not
		// pull, its proxy-1 set by hand to one that runs and reverted,
		// waited with the revert in flight. The next version took over in proxy-2, and the handoff
		// waited for the revert, which never ran: the rollout stalled with
		// the pod Updating. It now waits only for a write the kubelet
		// has not tried yet.
		bad, v2 := keptHotSet("proxy-pull-fails:v1", 1), keptHotSet("proxy:v2", 1)
		bad.Spec.DriftPolicy = v1alpha1.DriftRevert
		pod := keptHotPod("p01", bad)
		report(pod, false, running("app", 1, "mysql:8", true), pulling("proxy-1", "proxy-pull-fails:v1", 0, ""),
			running("proxy-2", 3, "empty:v1", true))
		pod = revertedHandEdit(t, bad, pod, "proxy:by-hand", false, running("app", 1, "mysql:8", true),
			running("proxy-1", 4, "proxy:by-hand", true), running("proxy-2", 3, "empty:v1", true))
		report(pod, false, running("app", 1, "mysql:8", true), pulling("proxy-1", "proxy-pull-fails:v1", 4, "proxy:by-hand"),
			running("proxy-2", 3, "empty:v1", true))
		// v2 is declared: its update goes into proxy-2; the kubelet
		// starts it, and it takes over.
		plan := keptNext(t, v2, pod)
		if len(plan.Updates) != 1 || !writes(plan.Updates[0], "proxy-2", "proxy:v2") {
			t.Fatalf("plan %v (held %+v), want proxy:v2 written into proxy-2", actions(plan), plan.Held)
		}
		pod = keptApply(t, pod, v2, plan.Updates[0])
		report(pod, false, running("app", 1, "mysql:8", true), pulling("proxy-1", "proxy-pull-fails:v1", 4, "proxy:by-hand"),
			running("proxy-2", 5, "proxy:v2", true))
		plan = keptNext(t, v2, pod)
		if len(plan.Updates) != 1 || !writes(plan.Updates[0], "proxy-1", "empty:v1") {
			t.Fatalf("plan %v (held %+v), want the handoff over the revert that never runs", actions(plan), plan.Held)
		}
	})
	t.Run("a newer image declared once the next slot took over still reaches the pod", func(t *testing.T) {
		// Found by TestModel: proxy-2 had taken over with proxy:v2 when
		// the set declared proxy:v3. The update wrote the handoff first,
		// as hot.go says, but recorded the latest revision with it: the
		// pod counted as updated, no update was due any more, and proxy:v3
		// never went into the emptied slot. The rollout completed with the
		// pod on proxy:v2.
		v1, v2, v3 := keptHotSet("proxy:v1", 1), keptHotSet("proxy:v2", 1), keptHotSet("proxy:v3", 1)
		pod := nextStarted(t, v1, v2, true)
		var plan rollout.Plan
		// The kubelet acts on each write, and reports it done, until
		// the plan writes nothing more.
		id := 5
		for range 4 {
			plan = keptNext(t, v3, pod)
			if len(plan.Updates) == 0 {
				break
			}
			for _, u := range plan.Updates {
				if writes(u, "proxy-1", "proxy:v3") || writes(u, "proxy-2", "proxy:v3") {
					return
				}
				pod = keptApply(t, pod, v3, u)
			}
			var st []corev1.ContainerStatus
			for _, c := range pod.Spec.Containers {
				prev := containerStatus(pod, c.Name)
				if prev.Image != c.Image {
					prev, id = running(c.Name, id, c.Image, true), id+1
				}
				st = append(st, prev)
			}
			report(pod, true, st...)
		}
		t.Errorf("proxy:v3 never written; the pod ends with %s and %s, record %s", specImage(pod, "proxy-1"), specImage(pod, "proxy-2"),
			pod.Annotations[v1alpha1.AnnotationState])
	})
}

// keptHotSet is the set s0 with the sidecar "proxy" of image, upgraded hot
// and idling on empty:v1, over every pod of the model's namespace.
func keptHotSet(image string, maxUnavailable int) *v1alpha1.SidecarSet {
	return &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s0", Generation: 1}, Spec: v1alpha1.SidecarSetSpec{
		Selector: &metav1.LabelSelector{},
		Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: image},
			UpgradeStrategy: &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: "empty:v1"}}},
		UpdateStrategy: v1alpha1.UpdateStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(int32(maxUnavailable)))},
	}}
}

// keptHotPod is a pod with an app container and set injected, as the
// model's newPod injects it.
func keptHotPod(name string, set *v1alpha1.SidecarSet) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: modelNS, Name: name, UID: types.UID("uid-" + name), Generation: 1,
			Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "mysql:8"}}},
	}
	spec := &set.Spec
	rec := revision.SetState{Revision: revision.Name(set.Name, spec), Hash: revision.Hash(spec), ImagelessHash: revision.ImagelessHash(spec)}
	slots, recs := hotInjected(spec.Containers[0])
	pod.Spec.Containers = append(pod.Spec.Containers, slots...)
	rec.Containers = recs
	maps.Copy(pod.Annotations, revision.HotVersions(recs))
	state := revision.State{set.Name: rec}
	pod.Annotations[v1alpha1.AnnotationState] = revision.Encode(state)
	pod.Annotations[v1alpha1.AnnotationInjected] = revision.InjectedNames(state)
	return pod
}

// report sets pod's status as the model's kubelet reports it, at the pod's
// generation.
func report(pod *corev1.Pod, ready bool, statuses ...corev1.ContainerStatus) {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ObservedGeneration: pod.Generation, ContainerStatuses: statuses,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}}
}

func running(name string, id int, image string, ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Image: image, ImageID: imageIDOf(image), ContainerID: fmt.Sprintf("containerd://%d", id),
		Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func creating(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
}

// pulling is a container whose image does not pull, showing its last
// exited instance.
func pulling(name, image string, last int, lastImage string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Image: image, ImageID: imageIDOf(lastImage), ContainerID: fmt.Sprintf("containerd://%d", last),
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}
}

func keptRecord(t *testing.T, pod *corev1.Pod) revision.SetState {
	t.Helper()
	state, err := revision.Decode(pod.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	return state["s0"]
}

// keptNext is the plan of set over pods.
func keptNext(t *testing.T, set *v1alpha1.SidecarSet, pods ...*corev1.Pod) rollout.Plan {
	t.Helper()
	latest := rollout.NewLatest(set)
	var in []rollout.Pod
	for _, pod := range pods {
		in = append(in, rollout.Classify(pod, keptRecord(t, pod), latest))
	}
	plan, err := rollout.Next(rollout.Input{Latest: latest, Pods: in, Strategy: set.Spec.UpdateStrategy, DriftPolicy: set.Spec.DriftPolicy})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// keptApply writes u into pod, as the model's write does: a new
// generation when an image changed, the status kept.
func keptApply(t *testing.T, pod *corev1.Pod, set *v1alpha1.SidecarSet, u rollout.PodUpdate) *corev1.Pod {
	t.Helper()
	out, _, err := rollout.Apply(pod, set.Name, u, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range out.Spec.Containers {
		if specImage(pod, c.Name) != c.Image {
			out.Generation = pod.Generation + 1
		}
	}
	out.Status = pod.Status
	return out
}

// writes reports whether u writes image into the container named name.
func writes(u rollout.PodUpdate, name, image string) bool {
	return slices.ContainsFunc(u.Containers, func(c rollout.ContainerImage) bool { return c.Name == name && c.Image == image })
}

// actions lists a plan's updates as "POD ACTION".
func actions(plan rollout.Plan) []string {
	var out []string
	for _, u := range plan.Updates {
		out = append(out, u.Pod.Name+" "+string(u.Action))
	}
	return out
}

// revertedHandEdit sets proxy-1 of pod by hand to image, the kubelet
// reporting statuses, and returns pod with the revert set plans for it
// written.
func revertedHandEdit(t *testing.T, set *v1alpha1.SidecarSet, pod *corev1.Pod, image string, ready bool,
	statuses ...corev1.ContainerStatus) *corev1.Pod {
	t.Helper()
	pod.Spec.Containers[1].Image = image
	pod.Generation++
	report(pod, ready, statuses...)
	plan := keptNext(t, set, pod)
	if len(plan.Updates) != 1 || plan.Updates[0].Action != rollout.ActionRevertDrift {
		t.Fatalf("plan %v, want the revert", actions(plan))
	}
	return keptApply(t, pod, set, plan.Updates[0])
}

// nextStarted returns p01, injected with v1 and running, once v2's first
// write is done: proxy:v2 written into proxy-2, which the kubelet has
// started, ready, beside proxy-1. appReady says whether the app, and so
// the pod, is ready.
func nextStarted(t *testing.T, v1, v2 *v1alpha1.SidecarSet, appReady bool) *corev1.Pod {
	t.Helper()
	pod := keptHotPod("p01", v1)
	report(pod, appReady, running("app", 1, "mysql:8", appReady), running("proxy-1", 2, "proxy:v1", true),
		running("proxy-2", 3, "empty:v1", true))
	plan := keptNext(t, v2, pod)
	if len(plan.Updates) != 1 || !writes(plan.Updates[0], "proxy-2", "proxy:v2") {
		t.Fatalf("updates %+v, want proxy:v2 written into proxy-2", plan.Updates)
	}
	pod = keptApply(t, pod, v2, plan.Updates[0])
	report(pod, appReady, running("app", 1, "mysql:8", appReady), running("proxy-1", 2, "proxy:v1", true),
		running("proxy-2", 4, "proxy:v2", true))
	return pod
}
