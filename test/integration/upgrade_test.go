package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/manager"
)

// heldScheduler is the scheduler name of the pods a test binds itself:
// the simulated nodes bind only the default scheduler's, so such a pod
// waits unbound, its status as the test writes it, until the test binds it.
const heldScheduler = "sidecarset-test-held"

// TestUpgradeFromLastReleaseMidRollout: an upgrade from the last release in
// the middle of a rollout. The manager of the last release rolled
// exporter:v2 over 8 pods (maxUnavailable 2) and died with p01 and p02 back
// but not settled, p03's new sidecar starting, p04 written with the kubelet
// not acting yet, p05..p08 not written (midRolloutFile, recorded by
// TestRecordLastReleaseMidRollout with that release's binary). This
// release's manager takes over from those records, as the last release
// wrote them, byte for byte, and must finish the rollout: every pod ends
// Ready on exporter:v2, never more than maxUnavailable pods are not Ready
// at once, the kubelet restarts each exporter once and no pod's spec is
// written twice, and the set says Complete with every pod matched (no
// record taken for corrupt).
//
// Why a recording: the last release cannot be built here (a clean clone
// may lack its history, and a test must not read git), and its records
// are only honest as its manager wrote them. The pods are made again as it
// left them: created as its webhook injected them, then given its write
// (annotations and images in one update, which the pod webhook, CREATE
// only, never sees; so the pods reach the recorded generations), then the
// recorded statuses, every time moved so that the manager died just now,
// the records' write times too (their other bytes as recorded), then bound
// to their recorded nodes, which take their containers over from those
// statuses (kubeletsim's restore: p04's kubelet now acts on the write).
// Meanwhile the last release still holds the managers' Lease (holdLease),
// as a Deployment's new pod waits for its old leader in a helm upgrade:
// this release's manager serves the webhooks and waits; the Lease given
// up, it takes over. minReadySeconds is 3: this release's writes wait it
// out, the last release's records carry none; the default a set from the
// last release gets, 10, would only make the test longer.
//
// The records this release writes meanwhile are checked against the last
// release's format (assertLastReleaseFormat): what a rollback needs of
// them for that release to read them as this release means them. How that
// release then acts on them needs its manager running
// (TestLastReleaseBeside, TestRollbackAfterRollout).
func TestUpgradeFromLastReleaseMidRollout(t *testing.T) {
	simulatedOnly(t, "pods are made again from recorded statuses, which only simulated nodes take over")
	const maxUnavailable, minReady, image = 2, 3, "exporter:v2"
	m := readMidRollout(t)
	f := newFixture(t)
	ctx := t.Context()
	rename := strings.NewReplacer(m.Set.Name, f.Set).Replace

	// The last release's manager leads until the pods are as it left them.
	t.Cleanup(func() { _ = cluster.Stack.StartManager() })
	if err := cluster.Stack.StopManager(); err != nil {
		t.Fatal(err)
	}
	release := holdLease(t, "sidecarset-manager-"+lastRelease)
	if err := cluster.Stack.StartManager(); err != nil {
		t.Fatal(err)
	}

	// Every recorded time moves by as much: the manager died just now.
	shift := time.Since(m.CapturedAt.Time)
	f.recreateSet(m, rename, shift, minReady)
	for _, rp := range m.Pods {
		f.recreatePod(m, rp, rename, shift)
	}
	world := watchPodWorld(t, f)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, rp := range m.Pods {
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: f.NS, Name: rp.Captured.Name},
			Target: corev1.ObjectReference{Kind: "Node", Name: rp.Captured.Spec.NodeName}}
		if err := cs.CoreV1().Pods(f.NS).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatalf("bind pod %s: %v", rp.Captured.Name, err)
		}
	}
	released := time.Now()
	release()
	f.WaitStatus("Complete, every pod matched", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(int32(len(m.Pods)))(s) && s.UnmanagedPods == 0 && s.LatestRevision == rename(m.Set.Status.LatestRevision)
	})
	world.stop(t)
	t.Logf("this release's manager finished the rollout %v after the Lease was given up, its first write %v after; at most %d pods not Ready at once (%s)",
		time.Since(released).Round(time.Millisecond), world.firstWrite.Sub(released).Round(time.Millisecond), world.maxNotReady, world.worst)
	if !world.firstWrite.IsZero() && world.firstWrite.Before(released) {
		t.Errorf("a pod was written %v before the Lease was given up: no manager of this release may act before it leads", released.Sub(world.firstWrite))
	}
	if world.maxNotReady > maxUnavailable {
		t.Errorf("%d pods not Ready at once (%s), more than maxUnavailable %d", world.maxNotReady, world.worst, maxUnavailable)
	}
	world.assertRolled(t, f, image, 1)
	assertLastReleaseFormat(t, m, world)
	if got := f.GetSet().Spec.UpdateStrategy.Paused; got {
		t.Errorf("the set paused itself")
	}
}

// recreateSet creates the set of m under the fixture's name, selecting the
// fixture's pods, with minReadySeconds minReady, then the status m recorded
// (its times moved by shift, its generations by as many as the set's), and
// the revisions m recorded, owned by it. No manager leads yet: nothing
// waits for one.
func (f *testFixture) recreateSet(m *midRollout, rename func(string) string, shift time.Duration, minReady int32) {
	t, ctx := f.T, f.T.Context()
	t.Helper()
	set := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: f.Set}, Spec: *m.Set.Spec.DeepCopy()}
	set.Spec.Selector = &metav1.LabelSelector{MatchLabels: f.Labels}
	set.Spec.UpdateStrategy.MinReadySeconds = new(minReady)
	if err := f.Client.Create(ctx, set); err != nil {
		t.Fatalf("create SidecarSet: %v", err)
	}
	t.Cleanup(func() { _ = f.Client.Delete(context.Background(), set) })
	f.Gen = set.Generation

	gen := func(g int64) int64 { return max(0, g-(m.Set.Generation-set.Generation)) }
	st := *m.Set.Status.DeepCopy()
	st.ObservedGeneration = gen(st.ObservedGeneration)
	st.LatestRevision, st.CompletedRevision = rename(st.LatestRevision), rename(st.CompletedRevision)
	if st.LastProgressTime != nil {
		st.LastProgressTime.Time = st.LastProgressTime.Add(shift)
	}
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = gen(st.Conditions[i].ObservedGeneration)
		st.Conditions[i].LastTransitionTime.Time = st.Conditions[i].LastTransitionTime.Add(shift)
	}
	if in := st.Injection; in != nil {
		in.ObservedGeneration = gen(in.ObservedGeneration)
		in.LastTransitionTime.Time = in.LastTransitionTime.Add(shift)
	}
	set.Status = st
	if err := f.Client.Status().Update(ctx, set); err != nil {
		t.Fatalf("write the recorded status of the set: %v", err)
	}

	for _, r := range m.Revisions {
		rev := r.DeepCopy()
		rev.Name, rev.Namespace = rename(rev.Name), manager.DefaultOptions().Namespace
		for k, v := range rev.Labels {
			rev.Labels[k] = rename(v)
		}
		if err := controllerutil.SetOwnerReference(set, rev, f.Client.Scheme()); err != nil {
			t.Fatal(err)
		}
		if err := f.Client.Create(ctx, rev); err != nil {
			t.Fatalf("create revision %s: %v", rev.Name, err)
		}
		t.Cleanup(func() { _ = f.Client.Delete(context.Background(), rev) })
	}
}

// recreatePod makes rp again in the fixture's namespace, unbound: created
// as recorded (the pod webhook sees the set's record and injects nothing),
// given the manager's last write in one update, then its recorded status
// with every time moved by shift. The records are the recorded bytes but
// for the set's name and the times of their writes.
func (f *testFixture) recreatePod(m *midRollout, rp recordedPod, rename func(string) string, shift time.Duration) {
	t, ctx := f.T, f.T.Context()
	t.Helper()
	relabel := func(labels map[string]string) map[string]string {
		out := maps.Clone(labels)
		for k := range m.Labels {
			delete(out, k)
		}
		maps.Copy(out, f.Labels)
		return out
	}
	annotations := func(in map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range in {
			v, err := shiftRecords(rename(v), shift)
			if err != nil {
				t.Fatalf("pod %s: annotation %s: %v", rp.Created.Name, k, err)
			}
			out[rename(k)] = v
		}
		return out
	}

	pod := rp.Created.DeepCopy()
	pod.Namespace, pod.Labels, pod.Annotations = f.NS, relabel(pod.Labels), annotations(pod.Annotations)
	pod.Spec.NodeName, pod.Spec.SchedulerName = "", heldScheduler
	want := maps.Clone(pod.Annotations)
	if err := f.Client.Create(ctx, pod); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	if !maps.Equal(pod.Annotations, want) {
		t.Fatalf("pod %s: admission changed the recorded annotations\n got %v\nwant %v", pod.Name, pod.Annotations, want)
	}

	captured := rp.Captured
	pod.Labels, pod.Annotations = relabel(captured.Labels), annotations(captured.Annotations)
	for _, list := range [][]corev1.Container{captured.Spec.InitContainers, captured.Spec.Containers} {
		for _, c := range list {
			for _, own := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
				if i := slices.IndexFunc(own, func(o corev1.Container) bool { return o.Name == c.Name }); i >= 0 {
					own[i].Image = c.Image
				}
			}
		}
	}
	if err := f.Client.Update(ctx, pod); err != nil {
		t.Fatalf("write the recorded write into pod %s: %v", pod.Name, err)
	}
	if pod.Generation != captured.Generation {
		t.Fatalf("pod %s: generation %d after the recorded write, recorded %d", pod.Name, pod.Generation, captured.Generation)
	}

	pod.Status = *captured.Status.DeepCopy()
	shiftPodStatus(&pod.Status, shift)
	// The node gives the pod its addresses again.
	pod.Status.HostIP, pod.Status.HostIPs, pod.Status.PodIP, pod.Status.PodIPs = "", nil, "", nil
	if err := f.Client.Status().Update(ctx, pod); err != nil {
		t.Fatalf("write the recorded status of pod %s: %v", pod.Name, err)
	}
}

// assertLastReleaseFormat checks the records this release wrote while world
// watched against the last release's format, as m recorded it and as that
// release's revision.go documents it; a rollback reads them so:
//
//   - every entry has its revision and both hashes: it refuses one without;
//   - a field both releases write has the same JSON kind in both: it reads
//     an entry whole, and a kind it does not expect makes the entry corrupt;
//   - a write carries every field of the write object that each write of
//     the last release carried (its generation and time);
//   - write.wasReady counts the pod as the rollout's disruption until it is
//     back, and goes, with the containers' previous fields, once it is: in
//     the last release's records a write that carries it always describes
//     the write in some container (a previous container, image or imageID,
//     or a resize). A record that carries it with none lets that release
//     count the pod as its own rollout's disruption whenever it is not
//     Ready, for whatever reason: one such pod down holds a slot of its
//     next rollout for ever.
func assertLastReleaseFormat(t *testing.T, m *midRollout, world *podWorld) {
	t.Helper()
	old := map[string]string{}
	var always map[string]bool
	for _, rp := range m.Pods {
		for _, p := range []corev1.Pod{rp.Created, rp.Captured} {
			for _, entry := range recordEntries(t, p.Annotations[v1alpha1.AnnotationState]) {
				fields := jsonFields(entry)
				maps.Copy(old, fields)
				if _, written := fields["write"]; !written {
					continue
				}
				if always == nil {
					always = map[string]bool{}
					for k := range fields {
						always[k] = strings.HasPrefix(k, "write.")
					}
				}
				for k := range always {
					if _, ok := fields[k]; !ok {
						always[k] = false
					}
				}
			}
		}
	}
	if !slices.Contains(slices.Collect(maps.Values(always)), true) {
		t.Fatalf("%s holds no write of the last release", midRolloutFile)
	}
	added := map[string]bool{}
	for pod, values := range world.records {
		for _, v := range values {
			for _, entry := range recordEntries(t, v) {
				fields := jsonFields(entry)
				for k, kind := range fields {
					was, ok := old[k]
					switch {
					case !ok:
						added[k] = true
					case was != kind:
						t.Errorf("pod %s: field %s is a JSON %s; the last release wrote a %s and reads this entry as corrupt: %s", pod, k, kind, was, v)
					}
				}
				e, _ := entry.(map[string]any)
				for _, k := range []string{"revision", "hash", "imagelessHash"} {
					if s, _ := e[k].(string); s == "" {
						t.Errorf("pod %s: an entry without %s, which the last release refuses: %s", pod, k, v)
					}
				}
				w, written := e["write"].(map[string]any)
				if !written {
					continue
				}
				for k, need := range always {
					if _, ok := fields[k]; need && !ok {
						t.Errorf("pod %s: a write lacks %s, which every write of the last release carries: %s", pod, k, v)
					}
				}
				if w["wasReady"] == true && !describesWrite(e["containers"]) {
					t.Errorf("pod %s: the write says wasReady with no container describing it; the last release reads this as its rollout's "+
						"disruption, which counts while the pod is not Ready, for any reason, and drops wasReady with the containers' "+
						"previous fields once the pod is back: %s", pod, v)
				}
			}
		}
	}
	t.Logf("this release's records add %v beside the last release's fields", slices.Sorted(maps.Keys(added)))
}

// describesWrite reports whether containers, the decoded containers of an
// entry, describe an in-place write in any container: the container, image
// or imageID it replaced, or a resize.
func describesWrite(containers any) bool {
	list, _ := containers.([]any)
	for _, c := range list {
		rc, _ := c.(map[string]any)
		for _, k := range []string{"previousContainerID", "previousImage", "previousImageID"} {
			if s, _ := rc[k].(string); s != "" {
				return true
			}
		}
		if rc["resized"] == true {
			return true
		}
	}
	return false
}

// recordEntries returns the entries of a state annotation, undecoded.
func recordEntries(t *testing.T, value string) []any {
	t.Helper()
	if value == "" {
		return nil
	}
	var entries map[string]any
	if err := json.Unmarshal([]byte(value), &entries); err != nil {
		t.Fatalf("state annotation %s: %v", value, err)
	}
	return slices.Collect(maps.Values(entries))
}

// jsonFields returns the path of every value in v, a decoded JSON value,
// with its kind: "write.generation": "number", "containers[].name":
// "string".
func jsonFields(v any) map[string]string {
	out := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		kind := ""
		switch v := v.(type) {
		case map[string]any:
			kind = "object"
			for k, e := range v {
				walk(strings.TrimPrefix(path+"."+k, "."), e)
			}
		case []any:
			kind = "array"
			for _, e := range v {
				walk(path+"[]", e)
			}
		case string:
			kind = "string"
		case float64:
			kind = "number"
		case bool:
			kind = "bool"
		default:
			kind = fmt.Sprintf("%T", v)
		}
		if path != "" {
			out[path] = kind
		}
	}
	walk("", v)
	return out
}

// readMidRollout reads midRolloutFile.
func readMidRollout(t *testing.T) *midRollout {
	t.Helper()
	b, err := os.ReadFile(midRolloutFile)
	if err != nil {
		t.Fatal(err)
	}
	m := &midRollout{}
	if err := json.Unmarshal(b, m); err != nil {
		t.Fatalf("read %s: %v", midRolloutFile, err)
	}
	return m
}

// holdLease makes holder the leader of the managers' Lease, as a manager
// of another release that leads does, for a minute; the returned func gives
// it up, as that manager does when it stops (the next one takes it at its
// next retry). A manager started meanwhile serves the webhooks and waits.
func holdLease(t *testing.T, holder string) (release func()) {
	t.Helper()
	key := client.ObjectKey{Namespace: manager.DefaultOptions().Namespace, Name: manager.LeaderElectionID}
	set := func(holder string, seconds int32) error {
		lease := &coordinationv1.Lease{}
		err := env.Client.Get(context.Background(), key, lease)
		if apierrors.IsNotFound(err) {
			lease.Namespace, lease.Name = key.Namespace, key.Name
		} else if err != nil {
			return err
		}
		now := metav1.NowMicro()
		lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &holder, &seconds
		lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
		if lease.ResourceVersion == "" {
			return env.Client.Create(context.Background(), lease)
		}
		return env.Client.Update(context.Background(), lease)
	}
	if err := set(holder, 60); err != nil {
		t.Fatalf("hold Lease %s as %s: %v", key, holder, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := set("", 1); err != nil {
				t.Errorf("give Lease %s up: %v", key, err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// atPattern finds the time of a write in a record, as the records spell it.
var atPattern = regexp.MustCompile(`"at":"([^"]+)"`)

// shiftRecords returns the annotation value v with the time of every write
// moved by d, and every other byte as it was.
func shiftRecords(v string, d time.Duration) (string, error) {
	var err error
	out := atPattern.ReplaceAllStringFunc(v, func(m string) string {
		at, perr := time.Parse(time.RFC3339Nano, atPattern.FindStringSubmatch(m)[1])
		if perr != nil {
			err = perr
			return m
		}
		return `"at":"` + at.Add(d).UTC().Format(metav1.RFC3339Micro) + `"`
	})
	return out, err
}

// shiftPodStatus moves every time of st by d.
func shiftPodStatus(st *corev1.PodStatus, d time.Duration) {
	shift := func(t *metav1.Time) {
		if t != nil && !t.IsZero() {
			t.Time = t.Add(d)
		}
	}
	shift(st.StartTime)
	for i := range st.Conditions {
		shift(&st.Conditions[i].LastProbeTime)
		shift(&st.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			for _, s := range []*corev1.ContainerState{&list[i].State, &list[i].LastTerminationState} {
				if s.Running != nil {
					shift(&s.Running.StartedAt)
				}
				if s.Terminated != nil {
					shift(&s.Terminated.StartedAt)
					shift(&s.Terminated.FinishedAt)
				}
			}
		}
	}
}
