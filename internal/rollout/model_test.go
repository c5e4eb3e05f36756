package rollout_test

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/imageref"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
	"github.com/sidecarset/sidecarset/internal/status"
)

// TestModel drives the pure decisions (Classify, Next, Disrupted, Fresher,
// status.Compute), wired as the controller wires them, against a pure model
// of the kubelet and of the disruption controller, through random sequences
// of: kubelet syncs that report the status before acting (as the real one
// does), budget syncs that lag, reconciles on cache views up to two steps
// stale (never older than the last one read, as an informer's cache) with
// optimistic-lock writes, an admission policy that moves sidecar images to
// a mirror by tag or pins them to their digest (on create and update), image changes (new tags, digest pins of the
// running tag, undo, images that never pull, never get ready, crash, or
// fail after they were ready) of regular, native, ordinary init and
// HotUpgrade sidecars of up to three overlapping SidecarSets, and of a
// HotUpgrade sidecar's empty image,
// partition steps, pauses and resumes, hand edits of a pod's sidecar image
// with one set (reported or reverted by driftPolicy), changes of a running
// sidecar's memory (resized in place, the resize after the record sometimes
// lost), readiness probes that fail once, evictions through the eviction
// API (the owner then creates a pod in its place), nodes whose kubelet goes silent,
// is noticed (the node not Ready, its pods marked not Ready) and comes
// back, node clocks ahead of and behind the manager's, and manager
// restarts that forget every write in flight. After
// every step it checks:
//
//   - each set disrupts at most maxUnavailable ready pods at once: a write
//     that restarts a running sidecar of a ready pod disrupts it until it is
//     ready again, every written image running, for minReadySeconds, and
//     the write owes nothing more (a hot upgrade's handoff, a resize whose
//     call was lost);
//   - no write restarts a sidecar of a ready pod while its set disrupts
//     maxUnavailable pods;
//   - no write leaves a budget with more pods unhealthy than it allows
//     (disrupted by a rollout, or put in place of an evicted pod and not
//     yet ready), unless pods that were never ready already make it so;
//   - a reconcile moves no more pods to the latest revision than the
//     partition allows;
//   - no app container restarts;
//   - no write changes a pod on a node the view shows not Ready;
//   - no pod is written twice for one revision while it stays the latest;
//   - a HotUpgrade sidecar always serves: its two slots never both have an
//     empty image in the pod spec, a write puts an empty image into the
//     slot that serves only once the other slot's container is Ready and
//     runs the non-empty image written into it, at least one slot records a
//     version above 0, and the version annotations the slots read are the
//     record's.
//
// At the end every image is made good and every set resumed at partition 0:
// each rollout must complete within a bound, and then nothing more is
// written, to pods or status; every HotUpgrade sidecar then runs the latest
// image in one slot and the empty image in the other.
//
// Unless -rapid.checks says otherwise it runs modelChecks cases, the same
// ones every time (modelSeed unless -rapid.seed is given), so that a build
// never fails on a case no one has seen before:
// `go test ./internal/rollout -run TestModel -rapid.checks=100000` explores
// new ones. A failing case prints the -rapid.seed that replays it while the
// generator stays as it is, and its trace, which replays it after that
// changes too; the cases it found so far are kept as table tests
// (TestDisruptionKept, TestModelHotKept), or as traces when the fault was
// the model's (TestModelKept).
func TestModel(t *testing.T) {
	if !flagSet("rapid.checks") {
		set := map[string]string{"rapid.checks": strconv.Itoa(modelChecks)}
		if !flagSet("rapid.seed") {
			set["rapid.seed"] = strconv.FormatUint(modelSeed, 10)
		}
		for name, value := range set {
			f := flag.Lookup(name)
			if err := f.Value.Set(value); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = f.Value.Set(f.DefValue) }()
		}
	}
	rapid.Check(t, func(t *rapid.T) { newModel(t, nil).run() })
}

// modelChecks is how many random cases TestModel runs by default, from
// modelSeed.
const (
	modelChecks = 1000
	modelSeed   = 1
)

// modelKept are cases TestModel found whose fault was the model's, not
// the code's: no table test of the code can keep them. Each is kept as its
// trace (formatTrace), which a failing case prints: unlike a seed, it
// replays the same case after the generator changes.
var modelKept = []struct {
	why, trace string
}{
	{"the model took a write into a pod not ready as renewing it only when the write changed an image: a " +
		"resize alone into p05, down for an earlier write, was lost, and the model held p05 down until the resize " +
		"landed, though it had turned ready and served (s0 disrupts p01 with [p00 p05] down already, maxUnavailable 2)",
		"sets=3 s0-groups=c,b s0-native=0 s0-init=1 s0-hot=0 s0-maxUnavailable=2 s0-minReadySeconds=0 s0-deadline=291 s0-order=3 s0-scatter-group=0 s0-driftPolicy=1 s1-groups=c s1-native=1 s1-init=0 s1-hot=0 s1-maxUnavailable=1 s1-minReadySeconds=2 s1-deadline=30 s1-order=1 s1-weight=3 s1-weight-group=0 s1-driftPolicy=1 s2-groups=b,c s2-native=1 s2-init=1 s2-hot=1 s2-maxUnavailable=2 s2-minReadySeconds=2 s2-deadline=300 s2-order=1 s2-weight=50 s2-weight-group=0 s2-driftPolicy=0 pods=9 group=1 neverReady=5 node=1 oldKubelet=4 group=1 neverReady=5 node=2 oldKubelet=0 group=1 neverReady=1 node=1 oldKubelet=3 group=0 neverReady=1 node=0 oldKubelet=4 group=0 neverReady=0 node=1 oldKubelet=1 group=2 neverReady=3 node=1 oldKubelet=4 group=0 neverReady=0 node=0 oldKubelet=3 group=2 neverReady=0 node=0 oldKubelet=3 group=1 neverReady=5 node=2 oldKubelet=3 budgets=1 budget-group=0 budget-maxUnavailable=2 warm=1 warm=0 warm=0 warm=0 warm=0 warm=0 warm=0 warm=1 warm=0 warm=0 warm=0 warm=1 warm=0 warm=1 warm=0 warm=0 warm=1 warm=0 warm=1 warm=1 warm=0 warm=1 warm=1 warm=0 warm=1 warm=0 warm=1 warm=1 warm=0 warm=1 warm=1 warm=0 warm=1 warm=0 warm=1 warm=1 warm=1 warm=1 warm=0 warm=1 warm=0 warm=1 warm=0 steps=61 action=0 pod=7 action=11 pod=1 action=5 set=1 lag=0 action=1 pod=5 action=7 set=0 container=0 version=2 image-kind=0 action=4 set=0 lag=0 action=4 set=2 lag=0 action=2 pod=8 warm=0 action=6 budget=0 action=3 warm=1 warm=1 warm=1 warm=1 warm=0 action=12 set=2 native-memory=1 memory=2 action=8 set=2 strategy=2 partition=6 action=10 group=0 neverReady=1 node=2 oldKubelet=1 warm=0 action=1 pod=4 action=11 pod=8 action=4 set=0 lag=0 action=10 group=0 neverReady=1 node=0 oldKubelet=2 warm=0 action=3 action=12 set=1 native-memory=0 memory=2 action=10 group=1 neverReady=5 node=1 oldKubelet=0 warm=0 warm=1 warm=1 warm=1 warm=1 warm=1 action=4 set=1 lag=2 resize-lost=1 action=14 pod=5 flaps=1 action=1 pod=4 action=14 pod=0 flaps=1 action=10 group=0 neverReady=3 node=1 oldKubelet=2 warm=0 action=0 pod=6 action=14 pod=7 flaps=5 action=11 pod=10 action=4 set=2 lag=2 action=10 group=2 neverReady=1 node=0 oldKubelet=0 warm=1 warm=0 warm=1 warm=0 warm=1 warm=0 warm=0 warm=0 action=0 pod=0 action=11 pod=1 action=0 pod=10 action=10 action=0 pod=4 action=0 pod=10 action=5 set=0 lag=2 action=6 budget=0 action=12 set=0 memory=2 action=0 pod=12 action=12 set=1 native-memory=1 memory=1 action=4 set=1 lag=0 resize-lost=3 resize-lost=1 action=8 set=1 strategy=1 action=0 pod=2 action=4 set=2 lag=2 action=5 set=0 lag=2 resize-lost=3 resize-lost=3 resize-lost=0 resize-lost=0 resize-lost=3 resize-lost=0 action=3 action=6 budget=0 action=5 set=2 lag=2 action=3 action=8 set=0 strategy=1 action=1 pod=12 action=4 set=2 lag=0 action=4 set=0 lag=0 action=11 pod=8 action=10 action=0 pod=3 action=0 pod=11 action=0 pod=2 action=8 set=0 strategy=1 action=0 pod=11 resize-lost=2 resize-lost=1 resize-lost=0 resize-lost=3 warm=0 warm=0 warm=1 warm=0 warm=0 warm=1 warm=0 warm=1 warm=0 warm=0 warm=1 warm=0 warm=1 warm=0 warm=1 warm=1 resize-lost=0 resize-lost=1 warm=0 warm=1 resize-lost=3 warm=1 warm=1 resize-lost=1 warm=0 warm=1 warm=1 resize-lost=1 resize-lost=1 warm=0 warm=1 warm=1 warm=1 resize-lost=0 resize-lost=1 warm=1 warm=1 warm=1 warm=0 resize-lost=1 warm=1 warm=1 warm=1 resize-lost=1 resize-lost=1 warm=0 warm=1 warm=0 warm=0 warm=0 warm=0 warm=0 warm=1 warm=1 warm=1 warm=1 warm=1"},
	{"the model counted the restart a hand edit made of a HotUpgrade sidecar's idle slot in the wait of the set's " +
		"write: its minReadySeconds ran from that restart, and the model held p00 down after the planner released it " +
		"(s0's record of p00 says its write released, which the world says has it down)",
		"n0-skew=1 n1-skew=1 n2-skew=0 sets=1 s0-groups=a,c s0-native=1 s0-init=0 s0-hot=1 s0-maxUnavailable=1 s0-minReadySeconds=3 s0-deadline=300 s0-order=1 s0-weight=69 s0-weight-group=0 s0-driftPolicy=1 pods=10 group=0 neverReady=2 node=2 oldKubelet=4 group=0 neverReady=4 node=2 oldKubelet=2 group=0 neverReady=5 node=2 oldKubelet=3 group=1 neverReady=4 node=2 oldKubelet=0 group=2 neverReady=3 node=1 oldKubelet=4 group=2 neverReady=5 node=1 oldKubelet=4 group=0 neverReady=1 node=2 oldKubelet=1 group=2 neverReady=0 node=0 oldKubelet=3 group=0 neverReady=1 node=1 oldKubelet=3 group=0 neverReady=3 node=0 oldKubelet=2 budgets=0 warm=1 warm=1 warm=0 warm=1 warm=1 warm=0 warm=0 warm=0 warm=1 warm=0 warm=1 warm=1 warm=1 warm=0 warm=1 warm=0 warm=1 warm=1 warm=1 warm=0 warm=1 warm=0 warm=0 warm=1 warm=1 warm=0 warm=0 warm=1 warm=1 warm=0 warm=0 warm=1 warm=1 warm=1 warm=1 warm=1 warm=0 warm=1 warm=0 warm=1 warm=1 warm=0 warm=1 warm=0 warm=1 warm=0 steps=24 action=1 pod=2 action=0 pod=0 action=0 pod=0 action=9 action=10 group=1 neverReady=3 node=1 oldKubelet=1 warm=0 action=0 pod=1 action=14 pod=4 flaps=0 action=2 pod=0 action=9 action=11 pod=1 edited=1 edit=1 action=0 pod=9 action=1 pod=4 action=0 pod=0 action=10 group=0 neverReady=0 node=2 oldKubelet=1 warm=1 warm=0 warm=0 warm=0 warm=0 action=12 set=0 native-memory=0 memory=2 action=1 pod=4 action=0 pod=1 action=4 set=0 lag=2 resize-lost=1 resize-lost=0 resize-lost=3 resize-lost=1 resize-lost=0 resize-lost=2 action=11 pod=0 edited=3 edit=0 action=8 set=0 strategy=1 action=0 pod=9 action=14 pod=2 flaps=2 action=1 pod=6 action=1 pod=1 warm=0 resize-lost=1 resize-lost=1 warm=0 warm=0 warm=0 warm=1 warm=0 warm=1 warm=1 warm=0 warm=1 warm=0 warm=0 warm=1 resize-lost=0"},
	{"the model ended a write's disruption at a hand edit of its sidecar's image though the write's resize of that " +
		"sidecar was lost and still owed; the planner wrote the owed resize within the pod's slot, and the model took it " +
		"for a new disruption beside an eviction (budget pdb0 (maxUnavailable 1): [p02r p05r] unhealthy at once)",
		"n0-skew=0 n1-skew=0 n2-skew=0 policy=0 sets=1 s0-groups=c,b s0-native=0 s0-init=0 s0-hot=0 s0-maxUnavailable=2 s0-minReadySeconds=0 s0-deadline=30 s0-order=3 s0-scatter-group=0 s0-driftPolicy=0 pods=9 group=0 neverReady=0 node=0 oldKubelet=0 group=0 neverReady=1 node=0 oldKubelet=0 group=2 neverReady=0 node=0 oldKubelet=0 group=2 neverReady=2 node=0 oldKubelet=1 group=1 neverReady=1 node=0 oldKubelet=1 group=2 neverReady=4 node=0 oldKubelet=4 group=0 neverReady=5 node=0 oldKubelet=1 group=0 neverReady=2 node=0 oldKubelet=0 group=2 neverReady=5 node=0 oldKubelet=0 budgets=2 budget-group=2 budget-maxUnavailable=1 budget-group=0 budget-maxUnavailable=2 warm=0 warm=1 warm=1 warm=1 warm=1 warm=1 warm=1 warm=1 warm=0 warm=0 warm=0 warm=1 warm=1 warm=1 steps=97 action=0 pod=1 action=1 pod=1 action=0 pod=0 action=0 pod=1 action=0 pod=1 action=1 pod=4 action=0 pod=1 action=15 evict=2 neverReady=5 node=2 oldKubelet=3 action=0 pod=1 action=0 pod=0 action=6 budget=1 action=1 pod=0 action=0 pod=1 action=0 pod=1 action=1 pod=6 action=1 pod=2 warm=0 warm=1 action=1 pod=0 action=1 pod=7 action=3 action=1 pod=4 action=0 pod=0 action=12 set=0 memory=1 action=13 node=2 action=1 pod=1 action=1 pod=7 action=1 pod=0 action=0 pod=5 action=6 budget=0 action=5 set=0 lag=0 resize-lost=0 resize-lost=1 action=2 pod=5 action=6 budget=0 action=6 budget=1 action=0 pod=1 action=11 pod=2 edited=0 edit=2 action=1 pod=1 action=0 pod=1 action=1 pod=0 action=1 pod=0 action=15 evict=2 action=0 pod=0 action=0 pod=0 action=0 pod=1 action=6 budget=1 action=2 pod=6 action=1 pod=1 action=1 pod=0 action=0 pod=8 action=6 budget=1 action=15 evict=6 neverReady=0 node=0 oldKubelet=2 action=0 pod=7 action=0 pod=0 action=0 pod=1 action=0 pod=0 action=1 pod=0 action=0 pod=1 action=0 pod=0 action=0 pod=0 action=0 pod=1 action=1 pod=0 action=1 pod=1 action=1 pod=1 action=0 pod=1 action=0 pod=1 action=0 pod=1 action=0 pod=1 action=3 warm=1 action=15 evict=5 neverReady=0 node=0 oldKubelet=2 action=5 set=0 lag=2 resize-lost=0"},
}

// TestModelView: the model's cache lags and never goes back (view).
func TestModelView(t *testing.T) {
	cases := []struct {
		lags []int
		want []string
	}{
		{[]int{0}, []string{"v2"}},
		{[]int{1}, []string{"v1"}},
		{[]int{2}, []string{"v1"}},
		{[]int{0, 2}, []string{"v2", "v2"}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.lags), func(t *testing.T) {
			m := &model{taken: 3, read: 1}
			for _, name := range []string{"v0", "v1", "v2"} {
				m.history = append(m.history, snap{pods: []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: name}}}})
			}
			var got []string
			for _, lag := range tc.lags {
				got = append(got, m.view(lag).pods[0].Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("views %v, want %v", got, tc.want)
			}
		})
	}
}

// TestModelKept replays each of modelKept.
func TestModelKept(t *testing.T) {
	for i, k := range modelKept {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			trace, err := parseTrace(k.trace)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(k.why)
			f := flag.Lookup("rapid.checks")
			was := f.Value.String()
			if err := f.Value.Set("1"); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = f.Value.Set(was) }()
			rapid.Check(t, func(t *rapid.T) {
				m := newModel(t, trace)
				m.run()
				if len(m.replay) > 0 {
					t.Fatalf("the model drew no more after %d draws; the trace holds %d more, from %v: "+
						"a draw of the trace was renamed or removed since", len(m.trace), len(m.replay), m.replay[0])
				}
			})
		})
	}
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

const (
	modelNS = "db"
	// stepTime is how far the clock moves per step.
	stepTime = 3 * time.Second
	// viewAge is the oldest a view a reconcile reads can be: the history
	// keeps three snapshots, one taken per step (view).
	viewAge = 3 * stepTime
)

type model struct {
	t       *rapid.T
	now     time.Time
	sets    []*mset
	pods    []*mpod
	budgets []*mbudget
	// history holds copies of the pods and nodes after each step, newest
	// last: the cache views reconciles may read. taken counts the copies
	// made; read is the number of the newest one a reconcile read (view).
	history     []snap
	taken, read int
	// gone holds the nodes whose kubelet acts on nothing and publishes
	// nothing; lost those of them the API shows not Ready, their pods
	// marked not Ready by the node controller.
	gone, lost map[string]bool
	// writes keeps, per set, the pods it wrote, as written (the
	// controller's memory; a restart forgets it).
	writes map[string]map[string]*corev1.Pod
	// skew is, per node, how far its clock is ahead of the manager's: the
	// times its kubelet reports are off by it.
	skew map[string]time.Duration
	// policy is what an admission policy does to sidecar images: "" (there
	// is none), "mirror" or "pin" (admit).
	policy string
	// trace holds every value drawn so far; replay, when the model
	// replays a kept trace, the values still to draw (model_draws_test.go).
	trace, replay []draw
	instance      int
	rv            int
}

// snap is one cache view: the pods, and the nodes not Ready.
type snap struct {
	pods []*corev1.Pod
	lost map[string]bool
}

type mset struct {
	set            *v1alpha1.SidecarSet
	maxUnavailable int
	// written counts, per pod, the updates written for the current latest
	// revision.
	written map[string]int
	latest  string
	// revisions keeps every spec the set declared, by revision name, as
	// ControllerRevisions do.
	revisions map[string]v1alpha1.SidecarSetSpec
}

// injected returns the spec the webhook injects into new pods: the latest,
// or the last completed one while a stalled rollout is paused.
func (s *mset) injected() *v1alpha1.SidecarSetSpec {
	if name := inject.FallbackRevision(s.set); name != "" {
		spec := s.revisions[name]
		return &spec
	}
	return &s.set.Spec
}

// mctr is a container as the kubelet runs it.
type mctr struct {
	name       string
	init, runs bool
	// instance numbers the running container, 0 for none; image is the
	// image it was started from (or failed to start from, when waiting).
	instance int
	image    string
	// waiting: the container does not run (its image does not pull, or it
	// crashed and waits to restart); last and lastImage are its last exited
	// instance, which a waiting container's status shows.
	waiting   bool
	last      int
	lastImage string
	// warm counts the syncs until a new container is ready; age counts
	// the syncs since it started.
	warm, age int
	// mem is the memory the runtime applied to the running container.
	mem string
	// started is when the running instance started, by the node's clock.
	started time.Time
}

type mpod struct {
	pod        *corev1.Pod
	ctrs       []*mctr
	neverReady bool
	// oldKubelet: the node's kubelet does not report observedGeneration.
	oldKubelet bool
	// disrupted names the sets whose write restarted a sidecar of the pod
	// while it was ready, with the set's minReadySeconds at the write,
	// until it has been ready that long with every written image running
	// (the contract's release, judged from what the kubelet did).
	disrupted map[string]time.Duration
	// renewed names the sets of disrupted whose last write found the pod
	// not ready: it lost nothing by that write, and is back once it serves
	// again; what that write owes (a handoff) disrupts it anew.
	renewed map[string]bool
	// owedMemory is the memory a set's write asked of a sidecar, by name,
	// whose resize was lost: the write is not done until it runs that.
	owedMemory map[string]string
	// readySince is when the pod's Ready condition last changed: when it
	// turned ready, while it is.
	readySince time.Time
	// replaces: the pod was created in place of an evicted one and has not
	// been ready yet; its budget counts it unhealthy.
	replaces bool
	// edited names the sidecars whose image a hand edit set last: their
	// restarts are the edit's, not a set's write's.
	edited map[string]bool
}

type mbudget struct {
	name           string
	group          string
	maxUnavailable int
	allowed        int32
}

// content is the digest of what ref names; a mirror serves the same.
func content(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		return ref[i+1:]
	}
	sum := sha256.Sum256([]byte(strings.TrimPrefix(ref, mirror)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func imageIDOf(ref string) string {
	registry, name := "docker.io/library/", ref
	if strings.HasPrefix(ref, mirror) {
		registry, name = mirror, strings.TrimPrefix(ref, mirror)
	}
	if i := strings.IndexAny(name, ":@"); i >= 0 {
		name = name[:i]
	}
	return registry + name + "@" + content(ref)
}

// mirror is where the model's admission policy moves sidecar images.
const mirror = "mirror.example/library/"

// admit returns ref as the model's admission policy stores it, when there
// is one, on create and on update: a sidecar image by tag moves to the
// mirror, by the same tag (as Kyverno's replace-registry does), or is
// pinned to the digest the tag has (as a digest-pinning policy does).
func (m *model) admit(ref string) string {
	sidecar := len(ref) > 2 && ref[0] == 's' && '0' <= ref[1] && ref[1] <= '9' && ref[2] == '-'
	if !sidecar || strings.Contains(ref, "@") {
		return ref
	}
	switch m.policy {
	case "mirror":
		return mirror + ref
	case "pin":
		return ref + "@" + content(ref)
	}
	return ref
}

// admitAll runs the admission policy over every container of pod.
func (m *model) admitAll(pod *corev1.Pod) {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			cs[i].Image = m.admit(cs[i].Image)
		}
	}
}

func pullFails(ref string) bool { return strings.Contains(ref, "pull-fails") }

var (
	groups = []string{"a", "b", "c"}
	nodes  = []string{"n0", "n1", "n2"}
)

// newModel draws a model from t, or replays trace when it is not nil.
func newModel(t *rapid.T, trace []draw) *model {
	m := &model{t: t, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), writes: map[string]map[string]*corev1.Pod{},
		gone: map[string]bool{}, lost: map[string]bool{}, skew: map[string]time.Duration{}, replay: trace}
	for _, n := range nodes {
		m.skew[n] = pick(m, []time.Duration{0, -2 * time.Second, 0, 2 * time.Second}, n+"-skew")
	}
	m.policy = pick(m, []string{"", "", "mirror", "pin"}, "policy")
	nSets := m.intn(1, 3, "sets")
	for i := range nSets {
		name := fmt.Sprintf("s%d", i)
		b := v1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "g", Operator: metav1.LabelSelectorOpIn,
				Values: m.groups(name + "-groups"),
			}}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: name + "-proxy", Image: name + "-proxy:v1",
				Resources: memory("32Mi")}}},
		}
		if m.coin(name + "-native") {
			b.InitContainers = append(b.InitContainers, v1alpha1.SidecarContainer{Container: corev1.Container{
				Name: name + "-logs", Image: name + "-logs:v1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Resources: memory("32Mi")}})
		}
		if m.coin(name + "-init") {
			b.InitContainers = append(b.InitContainers, v1alpha1.SidecarContainer{Container: corev1.Container{
				Name: name + "-schema", Image: name + "-schema:v1"}})
		}
		if m.coin(name + "-hot") {
			// Its memory never changes: the slots of a HotUpgrade sidecar
			// are not resized, and new resources need new pods.
			b.Containers = append(b.Containers, v1alpha1.SidecarContainer{
				Container: corev1.Container{Name: name + "-hot", Image: name + "-hot:v1", Resources: memory("32Mi")},
				UpgradeStrategy: &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade,
					HotUpgradeEmptyImage: name + "-hot" + emptyTag + "v1"}})
		}
		mu := m.intn(1, 3, name+"-maxUnavailable")
		b.UpdateStrategy = v1alpha1.UpdateStrategy{
			MaxUnavailable:  ptr.To(intstr.FromInt32(int32(mu))),
			MinReadySeconds: ptr.To(int32(pick(m, []int{0, 0, 3, 9}, name+"-minReadySeconds"))),
		}
		// A pod of a hot upgrade waits out minReadySeconds twice between
		// two signs of progress: a deadline shorter than that stalls a
		// rollout of good images, as it should.
		b.UpdateStrategy.ProgressDeadlineSeconds = ptr.To(int32(m.intn(30, 300, name+"-deadline")) +
			10**b.UpdateStrategy.MinReadySeconds)
		// The update order decides which pods go, never how many.
		switch m.intn(0, 3, name+"-order") {
		case 1:
			b.UpdateStrategy.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{{
				Weight:        int32(m.intn(1, 100, name+"-weight")),
				MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"g": pick(m, groups, name+"-weight-group")}},
			}}}
		case 2:
			b.UpdateStrategy.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{OrderPriority: []v1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "g"}}}
		case 3:
			b.UpdateStrategy.ScatterStrategy = []v1alpha1.UpdateScatterTerm{{Key: "g", Value: pick(m, groups, name+"-scatter-group")}}
		}
		b.DriftPolicy = pick(m, []v1alpha1.DriftPolicy{v1alpha1.DriftReport, v1alpha1.DriftRevert}, name+"-driftPolicy")
		set := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}, Spec: b}
		ms := &mset{set: set, maxUnavailable: mu, written: map[string]int{}, latest: revision.Hash(&set.Spec),
			revisions: map[string]v1alpha1.SidecarSetSpec{}}
		ms.revisions[revision.Name(name, &set.Spec)] = *set.Spec.DeepCopy()
		m.sets = append(m.sets, ms)
	}
	nPods := m.intn(2, 10, "pods")
	for i := range nPods {
		m.pods = append(m.pods, m.newPod(fmt.Sprintf("p%02d", i), pick(m, groups, "group"),
			m.intn(0, 5, "neverReady") == 0))
	}
	for i := range m.intn(0, 2, "budgets") {
		m.budgets = append(m.budgets, &mbudget{name: fmt.Sprintf("pdb%d", i), group: pick(m, groups, "budget-group"),
			maxUnavailable: m.intn(1, 2, "budget-maxUnavailable")})
	}
	for _, p := range m.pods {
		m.sync(p)
		m.sync(p)
	}
	for _, b := range m.budgets {
		m.syncBudget(b)
	}
	m.snapshot()
	return m
}

// newPod creates a pod with an app container and every matching set
// injected, as the webhook does, on a node that is Ready.
func (m *model) newPod(name, group string, neverReady bool) *mpod {
	up := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return m.gone[n] })
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: modelNS, Name: name, UID: types.UID("uid-" + name), Generation: 1,
			Labels: map[string]string{"g": group}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: pick(m, up, "node"),
			Containers: []corev1.Container{{Name: "app", Image: "mysql:8"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if neverReady {
		pod.Spec.Containers[0].Image = "mysql-never-ready:8"
	}
	state := revision.State{}
	for _, s := range m.sets {
		if !selects(s.set, pod) {
			continue
		}
		spec := s.injected()
		rec := revision.SetState{Revision: revision.Name(s.set.Name, spec), Hash: revision.Hash(spec),
			ImagelessHash: revision.ImagelessHash(spec)}
		for _, c := range spec.Containers {
			if c.Hot() {
				slots, recs := hotInjected(c)
				pod.Spec.Containers = append(pod.Spec.Containers, slots...)
				rec.Containers = append(rec.Containers, recs...)
				maps.Copy(pod.Annotations, revision.HotVersions(recs))
				continue
			}
			pod.Spec.Containers = append(pod.Spec.Containers, c.Container)
			rec.Containers = append(rec.Containers, revision.ContainerState{Name: c.Name, Image: c.Image})
		}
		for _, c := range spec.InitContainers {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c.Container)
			rec.Containers = append(rec.Containers, revision.ContainerState{Name: c.Name, Init: true, Image: c.Image})
		}
		state[s.set.Name] = rec
	}
	// The webhook, invoked again after the policy, records what it made.
	m.admitAll(pod)
	state, _ = rollout.RecordAdmitted(state, pod)
	pod.Annotations[v1alpha1.AnnotationState] = revision.Encode(state)
	pod.Annotations[v1alpha1.AnnotationInjected] = revision.InjectedNames(state)
	p := &mpod{pod: pod, neverReady: neverReady, disrupted: map[string]time.Duration{}, renewed: map[string]bool{}, owedMemory: map[string]string{}, edited: map[string]bool{}, oldKubelet: m.intn(0, 4, "oldKubelet") == 0}
	for _, c := range pod.Spec.InitContainers {
		p.ctrs = append(p.ctrs, &mctr{name: c.Name, init: true, runs: c.RestartPolicy != nil})
	}
	for _, c := range pod.Spec.Containers {
		p.ctrs = append(p.ctrs, &mctr{name: c.Name, runs: true})
	}
	m.bump(pod)
	return p
}

// emptyTag is what the name of a HotUpgrade sidecar's empty images has
// before their tag: "s0-hot-empty:v1". No other image has it.
const emptyTag = "-empty:"

func isEmpty(ref string) bool { return strings.Contains(ref, "-empty") }

// hotInjected returns the two slots of a HotUpgrade sidecar and their
// records, as the webhook injects them (inject/hot.go): NAME-1 on the
// image as version 1, NAME-2 idle on the empty image as version 0, both
// reading their versions from the pod's annotations.
func hotInjected(sc v1alpha1.SidecarContainer) ([]corev1.Container, []revision.ContainerState) {
	var slots []corev1.Container
	var recs []revision.ContainerState
	for i, name := range v1alpha1.HotSlots(sc.Name) {
		c := *sc.Container.DeepCopy()
		c.Name = name
		version := int64(1)
		if i == 1 {
			c.Image, version = sc.UpgradeStrategy.HotUpgradeEmptyImage, 0
		}
		for _, e := range [][2]string{{v1alpha1.EnvHotVersion, v1alpha1.AnnotationHotVersionPrefix}, {v1alpha1.EnvHotVersionAlt, v1alpha1.AnnotationHotVersionAltPrefix}} {
			c.Env = append(c.Env, corev1.EnvVar{Name: e[0], ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
				APIVersion: "v1", FieldPath: "metadata.annotations['" + e[1] + name + "']"}}})
		}
		slots = append(slots, c)
		recs = append(recs, revision.ContainerState{Name: name, Image: c.Image, Hot: &revision.HotSlot{Of: sc.Name, Version: version}})
	}
	return slots, recs
}

// hotPair is a HotUpgrade sidecar's two slot records in a pod's record.
type hotPair [2]revision.ContainerState

// hotPairsOf returns the HotUpgrade sidecars rec records, in record order.
func hotPairsOf(rec revision.SetState) []hotPair {
	var out []hotPair
	for i, a := range rec.Containers {
		for _, b := range rec.Containers[i+1:] {
			if a.Hot != nil && b.Hot != nil && a.Hot.Of == b.Hot.Of {
				out = append(out, hotPair{a, b})
			}
		}
	}
	return out
}

// serving returns the index of the slot that serves: the lower version
// above 0; -1 when neither is above 0.
func (h hotPair) serving() int {
	v0, v1 := h[0].Hot.Version, h[1].Hot.Version
	switch {
	case v0 == 0 && v1 == 0:
		return -1
	case v0 == 0:
		return 1
	case v1 == 0 || v0 < v1:
		return 0
	}
	return 1
}

func selects(set *v1alpha1.SidecarSet, pod *corev1.Pod) bool {
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	return err == nil && sel.Matches(labels.Set(pod.Labels))
}

func (m *model) bump(pod *corev1.Pod) {
	m.rv++
	pod.ResourceVersion = strconv.Itoa(m.rv)
}

// memory is a memory request and limit of v.
func memory(v string) corev1.ResourceRequirements {
	l := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(v)}
	return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// specMemory is the memory limit of the named container in the pod spec,
// "" without one.
func specMemory(pod *corev1.Pod, name string) string {
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; c.Name == name && ok {
			return q.String()
		}
	}
	return ""
}

func specImage(pod *corev1.Pod, name string) string {
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// sync is one kubelet sync of a pod: it reports the status of the
// containers as they are (observedGeneration the pod's generation), then
// acts: it restarts every running container whose spec image changed, and
// a crashed one; a container of an image that crashes exits. What it did
// shows in the next sync's status, as on a real node, where the kubelet
// publishes a sync's status before acting on the spec; but a ready
// container that exits, or fails its readiness probe, shows at once.
func (m *model) sync(p *mpod) {
	if m.gone[p.pod.Spec.NodeName] {
		return
	}
	m.publish(p)
	m.act(p)
}

// publish is the first half of a kubelet sync: it reports the status of
// the containers as they are.
func (m *model) publish(p *mpod) {
	pod := p.pod
	st := corev1.PodStatus{Phase: corev1.PodRunning, ObservedGeneration: pod.Generation}
	if p.oldKubelet {
		st.ObservedGeneration = 0
	}
	ready := !p.neverReady
	for _, c := range p.ctrs {
		cs := corev1.ContainerStatus{Name: c.name, Image: c.image}
		switch {
		case c.init && !c.runs && c.instance > 0:
			cs.ContainerID, cs.ImageID = fmt.Sprintf("containerd://%d", c.instance), imageIDOf(c.image)
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}
		case c.waiting:
			// The kubelet shows the last exited instance of a waiting
			// container.
			if c.last > 0 {
				cs.ContainerID, cs.ImageID = fmt.Sprintf("containerd://%d", c.last), imageIDOf(c.lastImage)
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}
			if crashes(c.image) || failsLate(c.image) {
				cs.State.Waiting.Reason = "CrashLoopBackOff"
			}
			ready = false
		case c.instance > 0:
			cs.ContainerID, cs.ImageID = fmt.Sprintf("containerd://%d", c.instance), imageIDOf(c.image)
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: m.nodeTime(p, c.started)}
			cs.Resources = &corev1.ResourceRequirements{}
			if c.mem != "" {
				r := memory(c.mem)
				cs.Resources = &r
			}
			cs.Ready = c.warm == 0 && !unready(c.image)
			ready = ready && cs.Ready
		default:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
			ready = false
		}
		if c.init {
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		} else {
			st.ContainerStatuses = append(st.ContainerStatuses, cs)
		}
	}
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	if ready != podReady(pod) {
		p.readySince = m.now
	}
	p.replaces = p.replaces && !ready
	st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond, LastTransitionTime: m.nodeTime(p, p.readySince)}}
	pod.Status = st
	m.bump(pod)
	// What this status shows is what the controller judges by: a set whose
	// sidecars it shows back, in a ready pod, disrupts it no more, whatever
	// this sync does next.
	for name, d := range p.disrupted {
		if ready && m.backFor(p, name, "") && m.readyFor(p, name, d) {
			m.end(p, name)
		}
	}
}

// notReady reports container name of p not ready, as the kubelet's prober
// does: in the status it published last, that container's ready bit and
// the pod's Ready condition.
func (m *model) notReady(p *mpod, name string) {
	for _, sts := range [][]corev1.ContainerStatus{p.pod.Status.InitContainerStatuses, p.pod.Status.ContainerStatuses} {
		for i := range sts {
			if sts[i].Name == name {
				sts[i].Ready = false
			}
		}
	}
	if podReady(p.pod) {
		p.readySince = m.now
		for i := range p.pod.Status.Conditions {
			if c := &p.pod.Status.Conditions[i]; c.Type == corev1.PodReady {
				c.Status, c.LastTransitionTime = corev1.ConditionFalse, m.nodeTime(p, m.now)
			}
		}
	}
	m.bump(p.pod)
}

// act is the second half of a kubelet sync: it restarts every running
// container whose spec image changed, and a crashed one.
func (m *model) act(p *mpod) {
	pod := p.pod
	// Exits first. A ready container that exits on its own the kubelet
	// reports at once, as a real one does (its PLEG sees the exit within
	// a second), before it acts on the spec.
	failedReady := false
	exited := map[*mctr]bool{}
	for _, c := range p.ctrs {
		if c.warm > 0 {
			c.warm--
		}
		c.age++
		if c.runs && c.instance > 0 && c.image == specImage(pod, c.name) && (crashes(c.image) || failsLate(c.image) && c.age > 2) {
			failedReady = failedReady || c.warm == 0 && !unready(c.image)
			c.last, c.lastImage, c.instance, c.waiting = c.instance, c.image, 0, true
			exited[c] = true
		}
	}
	if failedReady {
		m.publish(p)
	}
	for _, c := range p.ctrs {
		want := specImage(pod, c.name)
		switch {
		case exited[c]:
		case c.init && !c.runs:
			// Ran once, before the app; never again.
			if c.instance == 0 {
				m.instance++
				c.instance, c.image, c.started = m.instance, want, m.now
			}
		case c.instance > 0 && c.image == want:
			// A resize, in place.
			c.mem = specMemory(pod, c.name)
		case c.instance == 0 && !c.waiting, c.image != want, c.waiting && !pullFails(want):
			if c.name == "app" && (c.instance > 0 || c.last > 0) {
				m.t.Fatalf("pod %s: app container restarted (%s → %s)", pod.Name, c.image, want)
			}
			if c.instance > 0 {
				c.last, c.lastImage = c.instance, c.image
			}
			c.image = want
			if pullFails(want) {
				c.waiting, c.instance = true, 0
				continue
			}
			m.instance++
			c.instance, c.waiting, c.started, c.age = m.instance, false, m.now, 0
			c.mem = specMemory(pod, c.name)
			c.warm = m.intn(0, 1, "warm")
		}
	}
	for name, d := range p.disrupted {
		if m.backFor(p, name, "") && podReady(p.pod) && m.readyFor(p, name, d) {
			m.end(p, name)
		}
	}
}

// end ends p's disruption by set.
func (m *model) end(p *mpod, set string) {
	delete(p.disrupted, set)
	delete(p.renewed, set)
}

// release ends the disruptions of p that time alone ends: p is ready with
// every written image running, and has been for the set's minReadySeconds
// by now, whether or not the kubelet synced it since.
func (m *model) release(p *mpod) {
	for name, d := range p.disrupted {
		if podReady(p.pod) && m.backFor(p, name, "") && m.readyFor(p, name, d) {
			m.end(p, name)
		}
	}
}

// nodeTime is t as the kubelet of p's node reports it, by its clock.
func (m *model) nodeTime(p *mpod, t time.Time) metav1.Time {
	return metav1.NewTime(t.Add(m.skew[p.pod.Spec.NodeName]))
}

// readyFor reports whether p has been ready for d, counted from its turn to
// ready and the start of every running sidecar of set but those a hand
// edit restarted, which are the edit's. A node clock behind
// the manager's shortens d by as much (as documented): the manager reads
// those times by its own clock.
func (m *model) readyFor(p *mpod, set string, d time.Duration) bool {
	since := p.readySince
	for _, c := range p.ctrs {
		if c.runs && c.instance > 0 && strings.HasPrefix(c.name, set+"-") && !p.edited[c.name] && c.started.After(since) {
			since = c.started
		}
	}
	return !m.now.Before(since.Add(d + min(0, m.skew[p.pod.Spec.NodeName])))
}

// backFor reports whether the disruption set made to p is over: p is
// ready, and every sidecar of set runs its spec image (but except, which a
// hand edit changed) and the memory the write asked for. A change
// someone else made to another container, still to be acted on, is not the
// set's: the set sees the pod ready with its own work done, as it is.
func (m *model) backFor(p *mpod, set, except string) bool {
	if p.neverReady {
		return false
	}
	for _, c := range p.ctrs {
		if !c.runs {
			continue
		}
		if c.waiting || c.instance == 0 || c.warm > 0 || unready(c.image) {
			return false
		}
		// The image of except is someone else's; a resize of it is still
		// the write's.
		if strings.HasPrefix(c.name, set+"-") && (c.name != except && c.image != specImage(p.pod, c.name) ||
			c.mem != specMemory(p.pod, c.name) || p.owes(c) && !p.renewed[set]) {
			return false
		}
	}
	// A hot upgrade's write is not done until its handoff is, nor a write
	// whose resize was lost until that resize is: the pod disrupted by it
	// stays so, serving between the two or not, as the contract counts it.
	// A hand edit of the next slot ends it. A pod written anew while not
	// ready is back once it serves again (renewed).
	if p.renewed[set] {
		return true
	}
	state, _ := revision.Decode(p.pod.Annotations)
	for _, h := range hotPairsOf(state[set]) {
		if i := h.serving(); i >= 0 && h[1-i].Hot.Version != 0 && specImage(p.pod, h[1-i].Name) == h[1-i].Image {
			return false
		}
	}
	return true
}

// owes reports whether a write's resize of c was lost and c does not run
// the memory it asked for.
func (p *mpod) owes(c *mctr) bool {
	want, ok := p.owedMemory[c.name]
	return ok && want != c.mem
}

func crashes(ref string) bool { return strings.Contains(ref, "crashes") }

// failsLate reports whether a container of ref exits after it has been
// ready for two syncs (6 s: longer than some minReadySeconds, shorter
// than others), and again after each restart.
func failsLate(ref string) bool { return strings.Contains(ref, "fails-late") }

// unready reports whether a container of ref never passes its readiness
// probe: it crashes, or its image never gets ready.
func unready(ref string) bool { return crashes(ref) || strings.Contains(ref, "never-ready") }

// back reports whether the kubelet runs every written image of p and p is
// ready.
func (m *model) back(p *mpod) bool {
	if p.neverReady {
		return false
	}
	for _, c := range p.ctrs {
		if c.runs && (c.waiting || c.instance == 0 || c.warm > 0 || unready(c.image) || c.image != specImage(p.pod, c.name) ||
			c.mem != specMemory(p.pod, c.name)) {
			return false
		}
	}
	return true
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// syncBudget is one pass of the disruption controller over a budget.
func (m *model) syncBudget(b *mbudget) {
	var total, healthy int
	for _, p := range m.pods {
		if p.pod.Labels["g"] == b.group {
			total++
			if podReady(p.pod) {
				healthy++
			}
		}
	}
	b.allowed = int32(max(0, healthy-(total-b.maxUnavailable)))
}

func (m *model) snapshot() {
	view := snap{pods: make([]*corev1.Pod, len(m.pods)), lost: maps.Clone(m.lost)}
	for i, p := range m.pods {
		view.pods[i] = p.pod.DeepCopy()
	}
	m.history = append(m.history, view)
	m.taken++
	if len(m.history) > 3 {
		m.history = m.history[1:]
	}
}

// view returns the cache view a reconcile reads: lag steps old, but never
// older than the one the last reconcile read. An informer's cache lags; it
// does not go back. The controller forgets a write once its cache shows it
// (rollout.Fresher), so a view from before that write would show the pod
// as it was, not counted, and let another pod go beside it. Worked cases,
// views 0..2 kept (2 the newest), the last reconcile read view 1
// (TestModelView):
//
//	lag 0 → 2
//	lag 1 → 1
//	lag 2 → 1 (not 0: view 1 showed what view 0 did not)
func (m *model) view(lag int) snap {
	first := m.taken - len(m.history) // the number of history[0]
	m.read = max(m.taken-1-lag, first, m.read)
	return m.history[m.read-first]
}

// reconcile is the controller's loop for one set over a cache view lag
// steps old (view).
func (m *model) reconcile(s *mset, lag int) {
	viewed := m.view(lag)
	view := viewed.pods
	latest := rollout.NewLatest(s.set)
	latest.Now = m.now
	var history []appsv1.ControllerRevision
	for name, spec := range s.revisions {
		history = append(history, appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: runtime.RawExtension{Raw: revision.Data(&spec)}})
	}
	latest.ResizableFrom = revision.ResizableFrom(&s.set.Spec, history)
	sets := rollout.Sets{}
	for _, o := range m.sets {
		sets[o.set.Name] = rollout.NewLatest(o.set)
	}
	// The cache view with this controller's writes it has not shown yet.
	fresh := make([]*corev1.Pod, len(view))
	for i, pod := range view {
		fresh[i] = pod
		for setName, writes := range m.writes {
			if w, ok := writes[pod.Name]; ok {
				if f, caughtUp := rollout.Fresher(pod, w, setName); !caughtUp {
					fresh[i] = f
				} else if setName == s.set.Name {
					delete(writes, pod.Name)
				}
			}
		}
	}
	var pods []rollout.Pod
	byName := map[string]*corev1.Pod{}
	for _, pod := range fresh {
		state, err := revision.Decode(pod.Annotations)
		if err != nil {
			m.t.Fatalf("pod %s: %v", pod.Name, err)
		}
		rec, ok := state[s.set.Name]
		if !ok || !selects(s.set, pod) {
			continue
		}
		cl := rollout.Classify(pod, rec, latest)
		// As the controller marks them (markDisruptedBy).
		others := maps.Clone(state)
		delete(others, s.set.Name)
		rollout.MarkOthers(&cl, pod, others, sets, m.now)
		// As the controller marks them (markNodeLost), from its cache of
		// nodes, as stale as that of pods.
		cl.NodeLost = viewed.lost[pod.Spec.NodeName]
		pods = append(pods, cl)
		byName[pod.Name] = pod
	}
	budgets := map[types.NamespacedName][]rollout.Budget{}
	for _, b := range m.budgets {
		rb := rollout.Budget{Name: modelNS + "/" + b.name, DisruptionsAllowed: b.allowed}
		for _, pod := range fresh {
			state, _ := revision.Decode(pod.Annotations)
			if pod.Labels["g"] == b.group && rollout.Disrupted(pod, state, sets, m.now) {
				rb.Spent++
			}
		}
		for _, pod := range fresh {
			if pod.Labels["g"] == b.group {
				key := types.NamespacedName{Namespace: modelNS, Name: pod.Name}
				budgets[key] = append(budgets[key], rb)
			}
		}
	}
	releasedBefore, _ := rollout.ReleasedBefore(pods, latest.ReleasedBefore, m.now, viewAge)
	plan, err := rollout.Next(rollout.Input{Latest: latest, Pods: pods, Strategy: s.set.Spec.UpdateStrategy,
		DriftPolicy: s.set.Spec.DriftPolicy, Budgets: budgets, ReleasedBefore: releasedBefore, ReleaseMargin: viewAge})
	if err != nil {
		m.t.Fatalf("Next: %v", err)
	}
	onLatest := func() int {
		n := 0
		for _, p := range m.pods {
			state, _ := revision.Decode(p.pod.Annotations)
			if rec, ok := state[s.set.Name]; ok && rec.Hash == latest.Hash {
				n++
			}
		}
		return n
	}
	before := onLatest()

	var landed []rollout.PodUpdate
	for _, u := range plan.Updates {
		if m.write(s, byName[u.Pod.Name], viewed.lost, u) {
			landed = append(landed, u)
		}
	}
	// The partition over the pods as they are; pods created since the
	// view (on the latest revision already) the controller could not
	// count, nor see those evicted since.
	selected := 0
	for _, p := range m.pods {
		if state, _ := revision.Decode(p.pod.Annotations); selects(s.set, p.pod) && state[s.set.Name].Hash != "" {
			selected++
		}
	}
	partition := 0
	if pt := s.set.Spec.UpdateStrategy.Partition; pt != nil {
		n, _ := intstr.GetScaledValueFromIntOrPercent(pt, selected, true)
		partition = min(n, selected)
	}
	target, unseen := selected-partition, 0
	for _, p := range m.pods {
		if !slices.ContainsFunc(view, func(v *corev1.Pod) bool { return v.Name == p.pod.Name }) {
			unseen++
		}
	}
	for _, v := range view {
		if !slices.ContainsFunc(m.pods, func(p *mpod) bool { return p.pod.Name == v.Name }) {
			unseen++
		}
	}
	if after := onLatest(); after > max(target, before)+unseen {
		m.t.Fatalf("%s: %d pods on the latest revision after the reconcile, partition allows %d (were %d)",
			s.set.Name, after, target, before)
	}
	plan.Updates = landed
	res := status.Compute(status.Input{Generation: s.set.Generation, Latest: latest, Pods: pods, Plan: plan,
		Strategy: s.set.Spec.UpdateStrategy, Previous: s.set.Status, Now: metav1.NewTime(m.now), ReleasedBefore: releasedBefore})
	s.set.Status = res.Status
	if res.PauseRollout {
		s.set.Spec.UpdateStrategy.Paused = true
		s.set.Generation++
	}
}

// write applies one PodUpdate to the live pod, if it has not changed since
// the view (optimistic lock), and keeps the ground truth. lost are the
// nodes the view shows not Ready: no kubelet acts on a change of a pod on
// one of them, and once back it acts on every one at once.
func (m *model) write(s *mset, viewed *corev1.Pod, lost map[string]bool, u rollout.PodUpdate) bool {
	var p *mpod
	for _, mp := range m.pods {
		if mp.pod.Name == u.Pod.Name {
			p = mp
		}
	}
	// A pod evicted since the view was taken is gone (NotFound).
	if p == nil || p.pod.ResourceVersion != viewed.ResourceVersion {
		return false
	}
	m.checkHotWrite(s, p, u)
	// Disruptions that are over by now end before this write is judged.
	for _, q := range m.pods {
		m.release(q)
	}
	written := p.pod
	if u.WritesRecord() {
		var err error
		// Stamped with the time, as the controller writes it.
		if written, _, err = rollout.Apply(p.pod, s.set.Name, u.Stamped(m.now), m.now); err != nil {
			m.t.Fatalf("Apply: %v", err)
		}
		// The controller records what admission stored in place of what
		// it wrote (recordStored).
		m.admitAll(written)
		if rec, rewrites := rollout.RecordStored(u.Stamped(m.now), written); len(rewrites) > 0 {
			value, err := revision.Put(written.Annotations, s.set.Name, rec)
			if err != nil {
				m.t.Fatalf("Put: %v", err)
			}
			written.Annotations[v1alpha1.AnnotationState] = value
		}
	}
	restartsRunning, changed := false, false
	// The resize goes after the record, and may be lost (a crash, a
	// refusal): a later ActionResize writes it. A lost one disrupts the
	// pod all the same, as the contract counts it: the write holds the pod
	// from its record until it is done.
	resized := len(u.Resize) > 0 && m.intnOr(0, 3, 1, "resize-lost") > 0
	for _, r := range u.Resize {
		if r.Name == "app" {
			m.t.Fatalf("%s resized the app container of %s", s.set.Name, p.pod.Name)
		}
		restartsRunning = true
	}
	if u.Action == rollout.ActionUpdate || u.Action == rollout.ActionRevertDrift {
		for name := range p.owedMemory {
			if strings.HasPrefix(name, s.set.Name+"-") {
				delete(p.owedMemory, name)
			}
		}
	}
	for _, r := range u.Resize {
		if resized {
			delete(p.owedMemory, r.Name)
		} else {
			q := r.Resources.Limits[corev1.ResourceMemory]
			p.owedMemory[r.Name] = q.String()
		}
	}
	for _, c := range slices.Concat(written.Spec.InitContainers, written.Spec.Containers) {
		if was := specImage(p.pod, c.Name); was != c.Image {
			delete(p.edited, c.Name)
			if c.Name == "app" {
				m.t.Fatalf("%s wrote the app container of %s", s.set.Name, p.pod.Name)
			}
			changed = true
			restartsRunning = restartsRunning || c.RestartPolicy != nil || !slices.ContainsFunc(written.Spec.InitContainers,
				func(ic corev1.Container) bool { return ic.Name == c.Name })
		}
	}
	if changed {
		written.Generation++
	}
	if _, held := p.disrupted[s.set.Name]; held && (changed || len(u.Resize) > 0) && !podReady(p.pod) {
		// Written anew while not ready, the pod loses nothing by it: it is
		// back once it serves again, and what this write owes (a handoff,
		// a lost resize) disrupts it anew.
		p.renewed[s.set.Name] = true
	}
	if (changed || resized) && lost[written.Spec.NodeName] {
		m.t.Fatalf("%s wrote %s of %s, on a node not Ready:\n%s", s.set.Name, u.Action, p.pod.Name, m.describe(p))
	}
	if resized {
		written = rollout.Resize(written, u)
		written.Generation++
	}
	// The live pod keeps the status the kubelet last wrote.
	written.Status = p.pod.Status
	p.pod = written
	pod := written
	m.bump(pod)
	if m.writes[s.set.Name] == nil {
		m.writes[s.set.Name] = map[string]*corev1.Pod{}
	}
	m.writes[s.set.Name][pod.Name] = pod.DeepCopy()

	if _, held := p.disrupted[s.set.Name]; restartsRunning && podReady(pod) && !held {
		m.checkRoom(s, p)
	}
	if restartsRunning && podReady(pod) {
		healthy := len(p.disrupted) == 0
		delete(p.renewed, s.set.Name)
		p.disrupted[s.set.Name] = time.Duration(ptr.Deref(s.set.Spec.UpdateStrategy.MinReadySeconds, 0)) * time.Second
		if healthy {
			m.checkBudgets(p)
		}
	}
	if u.Action == rollout.ActionUpdate && (len(u.Containers) > 0 || len(u.Resize) > 0) {
		s.written[pod.Name]++
		if s.written[pod.Name] > 1 {
			m.t.Fatalf("%s wrote %s twice for revision %s", s.set.Name, pod.Name, u.State.Revision)
		}
	}
	return true
}

// checkRoom asserts, before a write of s disrupts p anew, that fewer than
// maxUnavailable pods are disrupted by s.
func (m *model) checkRoom(s *mset, written *mpod) {
	var disrupted []string
	for _, p := range m.pods {
		if _, ok := p.disrupted[s.set.Name]; ok && p != written {
			disrupted = append(disrupted, p.pod.Name)
		}
	}
	if len(disrupted) >= s.maxUnavailable {
		var pods []string
		for _, p := range m.pods {
			pods = append(pods, m.describe(p))
		}
		m.t.Fatalf("%s disrupts %s with %v down already, maxUnavailable %d:\n%s", s.set.Name, written.pod.Name, disrupted,
			s.maxUnavailable, strings.Join(pods, "\n"))
	}
}

// check asserts the invariants that hold after every step.
func (m *model) check() {
	for _, p := range m.pods {
		m.checkHot(p)
		m.release(p)
	}
	for _, s := range m.sets {
		var disrupted []string
		for _, p := range m.pods {
			if _, ok := p.disrupted[s.set.Name]; ok {
				disrupted = append(disrupted, p.pod.Name)
				m.checkNotReleased(s, p)
			}
		}
		if len(disrupted) > s.maxUnavailable {
			var pods []string
			for _, p := range m.pods {
				pods = append(pods, m.describe(p))
			}
			m.t.Fatalf("%s disrupts %v at once, maxUnavailable %d:\n%s", s.set.Name, disrupted, s.maxUnavailable, strings.Join(pods, "\n"))
		}
	}
}

// checkReleased asserts, once every rollout is complete and has been for
// viewAge, that each set's record of each pod back and ready is released:
// its releasedBefore passes the write, or the record says so.
func (m *model) checkReleased() {
	for _, p := range m.pods {
		if p.neverReady || !m.back(p) || !podReady(p.pod) {
			continue
		}
		state, _ := revision.Decode(p.pod.Annotations)
		for _, s := range m.sets {
			w, before := state[s.set.Name].Write, s.set.Status.ReleasedBefore
			if w != nil && (w.At == nil || before == nil || !w.At.Before(before)) {
				m.t.Fatalf("%s's write into %s is back and not released: %+v, releasedBefore %v\n%s",
					s.set.Name, p.pod.Name, *w, before, m.describe(p))
			}
		}
	}
}

// checkNotReleased asserts that the write of s that has p down is not
// released: neither passed by s's status.releasedBefore nor written
// released into p's record. Released, p would count nowhere.
func (m *model) checkNotReleased(s *mset, p *mpod) {
	state, _ := revision.Decode(p.pod.Annotations)
	rec, before := state[s.set.Name], s.set.Status.ReleasedBefore
	if w := rec.Write; w != nil && w.At != nil && before != nil && w.At.Before(before) {
		m.t.Fatalf("%s's releasedBefore %s passed the write at %s of %s, which the world says has it down:\n%s",
			s.set.Name, before.Format(time.RFC3339Nano), w.At.Format(time.RFC3339Nano), p.pod.Name, m.describe(p))
	}
	if rec.Write == nil && rec.Released != nil {
		m.t.Fatalf("%s's record of %s says its write released, which the world says has it down: %+v\n%s",
			s.set.Name, p.pod.Name, *rec.Released, m.describe(p))
	}
}

// checkHotWrite asserts, before u is written into p, that it puts an empty
// image into the slot of a HotUpgrade sidecar that serves (the lower
// version above 0 in the record) only when the other slot has taken over:
// its container status shows it Ready and running the non-empty image the
// record says the controller wrote into it, which its spec still holds,
// and the kubelet does run it, ready.
func (m *model) checkHotWrite(s *mset, p *mpod, u rollout.PodUpdate) {
	state, _ := revision.Decode(p.pod.Annotations)
	for _, ci := range u.Containers {
		if !isEmpty(ci.Image) {
			continue
		}
		for _, h := range hotPairsOf(state[s.set.Name]) {
			i := h.serving()
			if i < 0 || h[i].Name != ci.Name {
				continue
			}
			other := h[1-i]
			st := containerStatus(p.pod, other.Name)
			ok := other.Hot.Version != 0 && st.Ready && st.State.Running != nil && imageref.Same(other.Image, st.Image) &&
				!isEmpty(other.Image) && imageref.Same(other.Image, specImage(p.pod, other.Name))
			for _, c := range p.ctrs {
				// (One that fails late may have exited since the status
				// showed it ready: nothing sees that before the next one.)
				if c.name == other.Name && !failsLate(c.image) {
					ok = ok && c.instance > 0 && !c.waiting && c.warm == 0 && !unready(c.image) && imageref.Same(other.Image, c.image)
				}
			}
			if !ok {
				m.t.Fatalf("%s (%s) writes %s into %s, which serves, while %s has not taken over (status %+v):\n%s",
					s.set.Name, u.Action, ci.Image, ci.Name, other.Name, st, m.describe(p))
			}
		}
	}
}

// checkHot asserts that every HotUpgrade sidecar of p serves: its slots
// are not both on an empty image in the pod spec, one of them records a
// version above 0, and the version annotations the slots read when they
// start are the record's.
func (m *model) checkHot(p *mpod) {
	state, err := revision.Decode(p.pod.Annotations)
	if err != nil {
		m.t.Fatalf("pod %s: %v", p.pod.Name, err)
	}
	for set, rec := range state {
		for _, h := range hotPairsOf(rec) {
			if isEmpty(specImage(p.pod, h[0].Name)) && isEmpty(specImage(p.pod, h[1].Name)) {
				m.t.Fatalf("%s: both slots of %s have an empty image:\n%s", set, h[0].Hot.Of, m.describe(p))
			}
			if h.serving() < 0 {
				m.t.Fatalf("%s: no slot of %s records a version above 0:\n%s", set, h[0].Hot.Of, m.describe(p))
			}
			for k, v := range revision.HotVersions(h[:]) {
				if got := p.pod.Annotations[k]; got != v {
					m.t.Fatalf("%s: annotation %s is %q, the record says %q:\n%s", set, k, got, v, m.describe(p))
				}
			}
		}
	}
}

func containerStatus(pod *corev1.Pod, name string) corev1.ContainerStatus {
	for _, st := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if st.Name == name {
			return st
		}
	}
	return corev1.ContainerStatus{}
}

// checkBudgets asserts, when a write disrupted a healthy pod, that none of
// the pod's budgets has more pods unhealthy than it allows, unless pods that were never ready
// already make it so. (Pods that turn unhealthy later on their own, such as
// a new pod that never gets ready, are not the write's doing.)
func (m *model) checkBudgets(written *mpod) {
	for _, b := range m.budgets {
		if b.group != written.pod.Labels["g"] {
			continue
		}
		var unhealthy []string
		neverReady := 0
		for _, p := range m.pods {
			if p.pod.Labels["g"] != b.group {
				continue
			}
			if p.neverReady {
				neverReady++
			}
			if p.neverReady || len(p.disrupted) > 0 || p.replaces {
				unhealthy = append(unhealthy, p.pod.Name)
			}
		}
		if len(unhealthy) > max(b.maxUnavailable, neverReady) {
			var pods []string
			for _, p := range m.pods {
				pods = append(pods, fmt.Sprintf("%s disrupted %v ready since %s", m.describe(p), p.disrupted, p.readySince.Format(time.TimeOnly)))
			}
			m.t.Fatalf("budget %s (maxUnavailable %d): %v unhealthy at once, at %s:\n%s", b.name, b.maxUnavailable, unhealthy,
				m.now.Format(time.TimeOnly), strings.Join(pods, "\n"))
		}
	}
}

// setImage declares a new image for one of s's sidecars.
func (m *model) setImage(s *mset) {
	spec := &s.set.Spec
	all := len(spec.Containers) + len(spec.InitContainers)
	i := m.intn(0, all-1, "container")
	var sc *v1alpha1.SidecarContainer
	if i < len(spec.Containers) {
		sc = &spec.Containers[i]
	} else {
		sc = &spec.InitContainers[i-len(spec.Containers)]
	}
	c := &sc.Container
	version := pick(m, []string{"v1", "v2", "v3"}, "version")
	if sc.Hot() && m.intn(0, 3, "hot-empty") == 0 {
		// A new empty image, which goes into the idle slot in place.
		sc.UpgradeStrategy = sc.UpgradeStrategy.DeepCopy()
		sc.UpgradeStrategy.HotUpgradeEmptyImage = pick(m, []string{
			c.Name + emptyTag + version, c.Name + "-empty-pull-fails:" + version}, "empty-image")
		m.specChanged(s)
		return
	}
	switch m.intn(0, 6, "image-kind") {
	case 0:
		// A digest pin of the tag: the same content, a new reference.
		c.Image = c.Name + "@" + content(c.Name+":"+version)
	case 1:
		c.Image = c.Name + "-pull-fails:" + version
	case 2:
		c.Image = c.Name + "-crashes:" + version
	case 3:
		// Runs, and never passes its readiness probe.
		c.Image = c.Name + "-never-ready:" + version
	case 4:
		c.Image = c.Name + "-fails-late:" + version
	default:
		c.Image = c.Name + ":" + version
	}
	m.specChanged(s)
}

// setMemory declares a new memory for one of s's running sidecars, which
// running pods take by a resize.
func (m *model) setMemory(s *mset) {
	spec := &s.set.Spec
	c := &spec.Containers[0].Container
	if len(spec.InitContainers) > 0 && spec.InitContainers[0].RestartPolicy != nil && m.coin("native-memory") {
		c = &spec.InitContainers[0].Container
	}
	c.Resources = memory(pick(m, []string{"32Mi", "64Mi", "96Mi"}, "memory"))
	m.specChanged(s)
}

func (m *model) specChanged(s *mset) {
	s.set.Generation++
	s.revisions[revision.Name(s.set.Name, &s.set.Spec)] = *s.set.Spec.DeepCopy()
	if h := revision.Hash(&s.set.Spec); h != s.latest {
		s.latest = h
		clear(s.written)
	}
}

func (m *model) step() {
	m.now = m.now.Add(stepTime)
	switch m.intn(0, 15, "action") {
	case 0, 1, 2:
		m.sync(pick(m, m.pods, "pod"))
	case 3:
		for _, p := range m.pods {
			m.sync(p)
		}
	case 4, 5:
		m.reconcile(pick(m, m.sets, "set"), m.intn(0, 2, "lag"))
	case 6:
		if len(m.budgets) > 0 {
			m.syncBudget(pick(m, m.budgets, "budget"))
		}
	case 7:
		m.setImage(pick(m, m.sets, "set"))
	case 8:
		s := pick(m, m.sets, "set")
		switch m.intn(0, 2, "strategy") {
		case 0:
			s.set.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString(pick(m, []string{"0%", "50%", "100%"}, "partition")))
		case 1:
			s.set.Spec.UpdateStrategy.Paused = !s.set.Spec.UpdateStrategy.Paused
		case 2:
			s.set.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(int32(m.intn(0, len(m.pods), "partition"))))
		}
		m.specChanged(s)
	case 9:
		// A manager restart: the memory of writes is gone, and the new
		// cache starts from a fresh list.
		clear(m.writes)
		m.history = m.history[len(m.history)-1:]
	case 10:
		// A new pod (a scale-up), injected by the webhook.
		if len(m.pods) < 14 && len(m.gone) < len(nodes) {
			p := m.newPod(fmt.Sprintf("p%02d", len(m.pods)), pick(m, groups, "group"),
				m.intn(0, 5, "neverReady") == 0)
			m.pods = append(m.pods, p)
			m.sync(p)
			// The disruption controller's lag over pods it has not seen is
			// the eviction API's too; it is not what the model tests.
			for _, b := range m.budgets {
				m.syncBudget(b)
			}
		}
	case 11:
		m.editByHand(pick(m, m.pods, "pod"))
	case 12:
		m.setMemory(pick(m, m.sets, "set"))
	case 13:
		m.nodeChange(pick(m, nodes, "node"))
	case 14:
		// A readiness probe fails once: the container is not ready until
		// the next sync, which the kubelet's prober reports at once.
		p := pick(m, m.pods, "pod")
		c := pick(m, p.ctrs, "flaps")
		if c.runs && c.instance > 0 && !m.gone[p.pod.Spec.NodeName] {
			c.warm = 1
			m.notReady(p, c.name)
		}
	case 15:
		m.evict(pick(m, m.pods, "evict"))
	}
	m.snapshot()
	m.check()
}

// evict plays the eviction API and the pod's owner. A pod that two budgets
// select is refused. A ready pod goes only if its budget allows a
// disruption, as the disruption controller last showed it, and takes that
// room until the controller's next pass; a pod not ready goes whatever its
// budget says (unhealthyPodEvictionPolicy AlwaysAllow), and the controller
// passes at once: its lag over pods it has not seen is the eviction API's
// too, not what the model tests. Its owner creates a pod in
// its place (named after it), injected as any new pod, which its kubelet
// starts at its first sync. A pod on a node
// whose kubelet is gone is not deleted until it is back: it stays.
func (m *model) evict(p *mpod) {
	if m.gone[p.pod.Spec.NodeName] {
		return
	}
	var budgets []*mbudget
	for _, b := range m.budgets {
		if b.group == p.pod.Labels["g"] {
			budgets = append(budgets, b)
		}
	}
	ready := podReady(p.pod)
	if len(budgets) > 1 || len(budgets) == 1 && ready && budgets[0].allowed <= 0 {
		return
	}
	q := m.newPod(p.pod.Name+"r", p.pod.Labels["g"], m.intn(0, 5, "neverReady") == 0)
	q.replaces = true
	m.pods[slices.Index(m.pods, p)] = q
	for _, b := range budgets {
		if ready {
			b.allowed--
		} else {
			m.syncBudget(b)
		}
	}
}

// nodeChange moves a node one step through losing its kubelet and
// getting it back: a node up goes silent (its kubelet gone, before the
// node controller notices) or, once silent, is lost (the API shows it not
// Ready, and the node controller marks its pods not Ready) or back; a
// node lost comes back. A kubelet back publishes what runs at its next
// sync, Ready included, and acts on what was written meanwhile.
func (m *model) nodeChange(n string) {
	switch {
	case !m.gone[n]:
		// What its kubelet did last it reported (as a real one does within
		// a second): only what it would do next goes unseen.
		for _, p := range m.pods {
			if p.pod.Spec.NodeName == n {
				m.publish(p)
			}
		}
		m.gone[n] = true
	case !m.lost[n] && m.coin("noticed"):
		m.lost[n] = true
		for _, p := range m.pods {
			if p.pod.Spec.NodeName != n || !podReady(p.pod) {
				continue
			}
			p.readySince = m.now
			p.pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse,
				Reason: "NodeLost", LastTransitionTime: metav1.NewTime(m.now)}}
			m.bump(p.pod)
		}
	default:
		delete(m.gone, n)
		delete(m.lost, n)
	}
}

// editByHand changes the image of one of p's running sidecars in the pod
// spec, as kubectl patch does: drift, which the kubelet acts on at its next
// sync, and driftPolicy Revert writes back.
func (m *model) editByHand(p *mpod) {
	if len(m.sets) > 1 {
		// With several sets, whose a restart is once a hand edit overlaps
		// their writes is not modelled; one set is.
		return
	}
	var names []string
	for _, c := range p.ctrs {
		if c.runs && c.name != "app" {
			names = append(names, c.name)
		}
	}
	if len(names) == 0 {
		return
	}
	name := pick(m, names, "edited")
	images := []string{name + ":by-hand", name + "-pull-fails:by-hand"}
	for _, c := range p.ctrs {
		if c.name == name && c.instance > 0 {
			// Back to what runs, over a write the kubelet has not acted
			// on.
			// (Not another name for the content that runs, such as its
			// digest: the kubelet restarts the container for it, and no
			// status tells the container before from the one after.)
			images = append(images, c.image)
		}
	}
	image := m.admit(pick(m, images, "edit"))
	for _, cs := range [][]corev1.Container{p.pod.Spec.InitContainers, p.pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name && cs[i].Image != image {
				cs[i].Image = image
				p.edited[name] = true
				p.pod.Generation++
				m.bump(p.pod)
			}
		}
	}
	// An edit over a write the kubelet has not acted on ends the
	// disruption that write was to make: whatever restart comes now is the
	// edit's. The set's claim on the pod ends unless another of its
	// sidecars still has its write to come.
	for set, d := range p.disrupted {
		if strings.HasPrefix(name, set+"-") && m.backFor(p, set, name) && podReady(p.pod) && m.readyFor(p, set, d) {
			m.end(p, set)
		}
	}
}

func (m *model) run() {
	defer func() {
		if r := recover(); r != nil {
			m.t.Logf("the case as a trace, to keep in modelKept:\n%q", formatTrace(m.trace))
			panic(r)
		}
	}()
	for range m.intn(1, 120, "steps") {
		m.step()
	}
	m.finish()
}

// finish makes every image good and every rollout go to the end, with fresh
// views and budgets that can allow a disruption, and checks that each
// completes and then stays quiet.
func (m *model) finish() {
	clear(m.gone)
	clear(m.lost)
	for _, s := range m.sets {
		for i := range s.set.Spec.Containers {
			c := &s.set.Spec.Containers[i]
			c.Image = c.Name + ":final"
			if c.Hot() && pullFails(c.UpgradeStrategy.HotUpgradeEmptyImage) {
				c.UpgradeStrategy = c.UpgradeStrategy.DeepCopy()
				c.UpgradeStrategy.HotUpgradeEmptyImage = c.Name + emptyTag + "final"
			}
		}
		for i := range s.set.Spec.InitContainers {
			c := &s.set.Spec.InitContainers[i]
			c.Image = c.Name + ":final"
		}
		s.set.Spec.UpdateStrategy.Paused = false
		s.set.Spec.UpdateStrategy.Partition = nil
		m.specChanged(s)
	}
	m.budgets = slices.DeleteFunc(m.budgets, func(b *mbudget) bool {
		n := 0
		for _, p := range m.pods {
			if p.pod.Labels["g"] == b.group && p.neverReady {
				n++
			}
		}
		return n >= b.maxUnavailable
	})
	round := func() {
		m.now = m.now.Add(stepTime)
		for _, p := range m.pods {
			m.sync(p)
		}
		for _, b := range m.budgets {
			m.syncBudget(b)
		}
		m.snapshot()
		for _, s := range m.sets {
			m.reconcile(s, 0)
			m.snapshot()
		}
		m.check()
	}
	done := func() bool {
		for _, s := range m.sets {
			// Pods never ready keep Complete False (PodsNotReady), with
			// nothing left to do; the pods are checked below.
			c := meta.FindStatusCondition(s.set.Status.Conditions, v1alpha1.ConditionComplete)
			if c == nil || c.Status != metav1.ConditionTrue && c.Reason != status.ReasonPodsNotReady ||
				s.set.Status.ObservedGeneration != s.set.Generation {
				return false
			}
		}
		for _, p := range m.pods {
			if !p.neverReady && (!m.back(p) || !podReady(p.pod)) {
				return false
			}
			for _, s := range m.sets {
				d := time.Duration(ptr.Deref(s.set.Spec.UpdateStrategy.MinReadySeconds, 0)) * time.Second
				if !p.neverReady && !m.readyFor(p, s.set.Name, d) {
					return false
				}
			}
		}
		return true
	}
	// A hot upgrade takes two writes per pod, each waited for.
	bound := 20
	for _, s := range m.sets {
		perPod := 4
		if slices.ContainsFunc(s.set.Spec.Containers, func(c v1alpha1.SidecarContainer) bool { return c.Hot() }) {
			perPod = 8
		}
		// Each pod waits out minReadySeconds, a round per stepTime.
		perPod += int(time.Duration(ptr.Deref(s.set.Spec.UpdateStrategy.MinReadySeconds, 0))*time.Second/stepTime) + 1
		bound += perPod * len(m.pods)
	}
	for i := 0; !done(); i++ {
		if i == bound {
			var st []string
			for _, s := range m.sets {
				st = append(st, fmt.Sprintf("%s paused=%v %+v", s.set.Name, s.set.Spec.UpdateStrategy.Paused, s.set.Status.Conditions))
			}
			for _, p := range m.pods {
				st = append(st, m.describe(p))
			}
			m.t.Fatalf("good images did not roll out within %d rounds:\n%s", bound, strings.Join(st, "\n"))
		}
		round()
	}
	// Writes back are released within viewAge, by the sets' releasedBefore
	// or, behind a write that is not back, by a write of the record.
	for range 3*viewAge/stepTime + 3 {
		round()
	}
	m.checkReleased()
	statuses := make([]v1alpha1.SidecarSetStatus, len(m.sets))
	rvs := make([]string, len(m.pods))
	for i, s := range m.sets {
		statuses[i] = s.set.Status
	}
	round()
	for i, p := range m.pods {
		rvs[i] = p.pod.Annotations[v1alpha1.AnnotationState]
	}
	for range 3 {
		round()
	}
	for i, s := range m.sets {
		// But for releasedBefore: a write into a pod never ready is back
		// when its containers start, whenever that is.
		st := s.set.Status
		statuses[i].ReleasedBefore, st.ReleasedBefore = nil, nil
		if !status.Equal(statuses[i], st) {
			m.t.Fatalf("%s: status still changes once complete: %+v → %+v", s.set.Name, statuses[i], s.set.Status)
		}
	}
	for i, p := range m.pods {
		if got := p.pod.Annotations[v1alpha1.AnnotationState]; got != rvs[i] {
			m.t.Fatalf("pod %s still written once complete", p.pod.Name)
		}
	}
	m.checkHotDone()
}

// checkHotDone asserts, once every rollout is complete, that each
// HotUpgrade sidecar of each pod its set's rollout reaches (every pod that
// carries the set's record) runs the latest image in one slot, recorded
// with a version above 0, and the empty image in the other, recorded as
// version 0, in its record and its pod spec alike. (That the kubelet runs
// them, done already checked.)
func (m *model) checkHotDone() {
	for _, s := range m.sets {
		for _, sc := range s.set.Spec.Containers {
			if !sc.Hot() {
				continue
			}
			for _, p := range m.pods {
				state, _ := revision.Decode(p.pod.Annotations)
				rec, ok := state[s.set.Name]
				if !ok {
					continue
				}
				for _, h := range hotPairsOf(rec) {
					if h[0].Hot.Of != sc.Name {
						continue
					}
					i := h.serving()
					done := i >= 0 && h[1-i].Hot.Version == 0
					for j, want := range [2]string{sc.Image, sc.UpgradeStrategy.HotUpgradeEmptyImage} {
						if !done {
							break
						}
						slot := h[i]
						if j == 1 {
							slot = h[1-i]
						}
						want = m.admit(want)
						done = imageref.Same(slot.Image, want) && specImage(p.pod, slot.Name) == want
					}
					if !done {
						m.t.Fatalf("%s: %s of %s is not on %s with the other slot on %s once complete:\n%s",
							s.set.Name, sc.Name, p.pod.Name, sc.Image, sc.UpgradeStrategy.HotUpgradeEmptyImage, m.describe(p))
					}
				}
			}
		}
	}
}

// describe shows a pod as a failure message needs it: each container's
// spec image and what the kubelet runs, and the pod's record.
func (m *model) describe(p *mpod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s generation %d observed %d ready %v neverReady %v:", p.pod.Name, p.pod.Generation,
		p.pod.Status.ObservedGeneration, podReady(p.pod), p.neverReady)
	for _, c := range p.ctrs {
		fmt.Fprintf(&b, " %s spec %s runs #%d %s (waiting %v warm %d mem %s/%s);", c.name, specImage(p.pod, c.name), c.instance, c.image, c.waiting, c.warm, c.mem, specMemory(p.pod, c.name))
	}
	fmt.Fprintf(&b, " record %s", p.pod.Annotations[v1alpha1.AnnotationState])
	return b.String()
}

func isTrue(conds []metav1.Condition, t string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
