package rollout

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/imageref"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// verdict is the part of a Pod the classification tests look at.
type verdict struct {
	Updated, Updating, Upgradable, PodReady, Ready bool
	Drifted                                        []string
}

func verdictOf(p Pod) verdict {
	return verdict{p.Updated, p.Updating, p.Upgradable, p.PodReady, p.Ready, p.Drifted}
}

func TestClassify(t *testing.T) {
	v1, v2 := testSet("exporter:v1"), testSet("exporter:v2")
	latest := NewLatest(v2)

	written := func() *corev1.Pod { return writtenPod(t, v1, latest) }

	tests := []struct {
		name   string
		pod    func() *corev1.Pod
		latest Latest
		want   verdict
	}{
		{
			name: "injected at the latest revision, running and ready",
			pod:  func() *corev1.Pod { return injectedPod("p01", v2) },
			want: verdict{Updated: true, Upgradable: true, PodReady: true, Ready: true},
		},
		{
			name: "on an older revision that differs only in images",
			pod:  func() *corev1.Pod { return injectedPod("p01", v1) },
			want: verdict{Upgradable: true, PodReady: true, Ready: true},
		},
		{
			name: "written, kubelet not done: updating, Ready condition still True",
			pod:  written,
			want: verdict{Updated: true, Updating: true, Upgradable: true, PodReady: true},
		},
		{
			name: "written and swapped, pod not ready yet",
			pod: func() *corev1.Pod {
				pod := written()
				swap(pod)
				setReady(pod, false)
				return pod
			},
			want: verdict{Updated: true, Upgradable: true},
		},
		{
			name: "written and swapped, ready",
			pod: func() *corev1.Pod {
				pod := written()
				swap(pod)
				return pod
			},
			want: verdict{Updated: true, Upgradable: true, PodReady: true, Ready: true},
		},
		{
			name: "written, new image fails to pull",
			pod: func() *corev1.Pod {
				pod := written()
				pod.Status.ContainerStatuses[1] = corev1.ContainerStatus{Name: "exporter", Image: "exporter:v2",
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}
				setReady(pod, false)
				return pod
			},
			want: verdict{Updated: true, Updating: true, Upgradable: true},
		},
		{
			name: "something other than the image changed",
			pod:  func() *corev1.Pod { return injectedPod("p01", v1) },
			latest: func() Latest {
				set := testSet("exporter:v2")
				set.Spec.Containers[0].Args = []string{"--verbose"}
				return NewLatest(set)
			}(),
			want: verdict{PodReady: true, Ready: true},
		},
		{
			name: "image edited by hand, the kubelet runs it",
			pod: func() *corev1.Pod {
				pod := injectedPod("p01", v2)
				pod.Spec.Containers[1].Image = "exporter:debug"
				pod.Status.ContainerStatuses[1] = running("exporter", "exporter:debug")
				return pod
			},
			want: verdict{Updated: true, Upgradable: true, PodReady: true, Ready: true, Drifted: []string{"exporter"}},
		},
		{
			// The kubelet is about to restart the sidecar for the edit: the
			// pod is not counted ready with it, or a write into the next
			// pod could overlap that restart.
			name: "image edited by hand, the kubelet has not acted yet",
			pod: func() *corev1.Pod {
				pod := injectedPod("p01", v2)
				pod.Spec.Containers[1].Image = "exporter:debug"
				return pod
			},
			want: verdict{Updated: true, Upgradable: true, PodReady: true, Drifted: []string{"exporter"}},
		},
		{
			name: "native sidecar status is read from initContainerStatuses",
			pod: func() *corev1.Pod {
				pod := injectedPod("p01", v2)
				pod.Status.InitContainerStatuses[0].State = corev1.ContainerState{
					Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
				return pod
			},
			want: verdict{Updated: true, Upgradable: true, PodReady: true},
		},
		{
			name: "record names a container the pod does not have",
			pod: func() *corev1.Pod {
				pod := injectedPod("p01", v1)
				pod.Spec.InitContainers = nil
				pod.Status.InitContainerStatuses = nil
				return pod
			},
			want: verdict{PodReady: true, Ready: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := latest
			if tt.latest.Hash != "" {
				l = tt.latest
			}
			pod := tt.pod()
			before := pod.DeepCopy()
			got := Classify(pod, record(pod), l)
			if diff := cmp.Diff(tt.want, verdictOf(got)); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, pod); diff != "" {
				t.Errorf("Classify modified the pod (-before +after):\n%s", diff)
			}
		})
	}
}

func TestClassifyContainers(t *testing.T) {
	set := testSet("exporter:v1")
	pod := injectedPod("p01", set)
	got := Classify(pod, record(pod), NewLatest(testSet("exporter:v2")))
	rec := record(pod)
	want := []Container{
		{Name: "exporter", Runs: true, Image: "exporter:v1", ContainerID: "containerd://exporter-0", ImageID: imageID("exporter:v1"), StatusImage: "exporter:v1",
			Running: true, Ready: true, Recorded: rec.Containers[0], Complete: true},
		{Name: "shipper", Init: true, Runs: true, Image: "fluent-bit:3.1", ContainerID: "containerd://shipper-0", ImageID: imageID("fluent-bit:3.1"), StatusImage: "fluent-bit:3.1",
			Running: true, Ready: true, Recorded: rec.Containers[1], Complete: true},
	}
	if diff := cmp.Diff(want, got.Containers); diff != "" {
		t.Errorf("Containers (-want +got):\n%s", diff)
	}
	if got.Key != key("p01") {
		t.Errorf("Key = %v, want %v", got.Key, key("p01"))
	}
}

// TestUnacted: a sidecar whose image someone else changed is Unacted while
// its status shows another image running.
func TestUnacted(t *testing.T) {
	set := testSet("exporter:v1")
	pinned := "exporter@" + imageref.IDDigest(imageID("exporter:debug"))
	tests := []struct {
		name   string
		spec   string // the exporter's pod spec image; recorded: exporter:v1
		status corev1.ContainerStatus
		want   bool
	}{
		{"not drifted", "exporter:v1", runningAs("exporter:v1", "exporter:v1"), false},
		{"edited, the old container still runs", "exporter:debug", runningAs("exporter:v1", "exporter:v1"), true},
		{"edited, the edit's container runs", "exporter:debug", runningAs("exporter:debug", "exporter:debug"), false},
		{"edited, the runtime names it in full", "exporter:debug", runningAs("docker.io/library/exporter:debug", "exporter:debug"), false},
		{"edited to a digest the container runs, named by a tag", pinned, runningAs("docker.io/library/exporter:debug", "exporter:debug"), false},
		{"edited to a digest, the old container runs", pinned, runningAs("exporter:v1", "exporter:v1"), true},
		// Found by review: written now, the container the edit starts
		// once its image is pulled would be taken for the write's.
		{"edited, the old container stopped and the edit's image is being pulled", "exporter:debug", corev1.ContainerStatus{Name: "exporter", Image: "exporter:debug",
			ContainerID: "containerd://exporter-1", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}, true},
		{"edited, the old container killed, the next not started", "exporter:debug", corev1.ContainerStatus{Name: "exporter", Image: "exporter:v1",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}}, true},
		{"edited, the edit's image does not pull", "exporter:debug", corev1.ContainerStatus{Name: "exporter", Image: "exporter:debug",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}, false},
		{"edited, the edit's container crashes", "exporter:debug", corev1.ContainerStatus{Name: "exporter", Image: "exporter:debug",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := injectedPod("p01", set)
			pod.Spec.Containers[1].Image = tt.spec
			tt.status.Name = "exporter"
			pod.Status.ContainerStatuses[1] = tt.status
			got := Classify(pod, record(pod), NewLatest(set))
			if got.Containers[0].Unacted != tt.want {
				t.Errorf("Unacted = %v, want %v", got.Containers[0].Unacted, tt.want)
			}
		})
	}
}

// runningAs is the status of a running exporter showing image, from the
// content of ref.
func runningAs(image, ref string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "exporter", Image: image, ImageID: imageID(ref), ContainerID: "containerd://exporter-1",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func TestNewLatest(t *testing.T) {
	set := testSet("exporter:v2")
	got := NewLatest(set)
	want := Latest{
		Name:          got.Name,
		Hash:          got.Hash,
		ImagelessHash: NewLatest(testSet("exporter:v1")).ImagelessHash,
		// No pull policy to blank: both rules agree.
		PreviousImagelessHash: NewLatest(testSet("exporter:v1")).ImagelessHash,
		Containers:            map[string]string{"exporter": "exporter:v2", "shipper": "fluent-bit:3.1"},
		// Neither declares resources, which is a declaration of none.
		Resources: map[string]corev1.ResourceRequirements{"exporter": {}, "shipper": {}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NewLatest (-want +got):\n%s", diff)
	}
	if got.Name != setName+"-"+got.Hash {
		t.Errorf("Name = %q, want the set's name and the hash", got.Name)
	}
	// Read through a CRD older than the field, which prunes its default.
	set.Spec.UpdateStrategy.MinReadySeconds = nil
	if got := NewLatest(set).MinReadySeconds; got != v1alpha1.DefaultMinReadySeconds {
		t.Errorf("MinReadySeconds unset = %d, want the default %d", got, v1alpha1.DefaultMinReadySeconds)
	}
}

func TestActive(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, true},
		{"pending", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, true},
		{"succeeded", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, false},
		{"failed", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, false},
		{"being deleted", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, false},
	}
	for _, tt := range tests {
		if got := Active(tt.pod); got != tt.want {
			t.Errorf("%s: Active = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Pods injected by the previous release carry an ImagelessHash that kept a
// pull policy following the image; they stay upgradable in place.
func TestClassifyPreviousImagelessHash(t *testing.T) {
	withPolicy := func(image string) *v1alpha1.SidecarSet {
		set := testSet(image)
		set.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
		set.Spec.InitContainers[0].ImagePullPolicy = corev1.PullIfNotPresent
		return set
	}
	old, next := withPolicy("exporter:v1"), withPolicy("exporter:v2")
	pod := injectedPod("p01", old)
	rec := record(pod)
	rec.ImagelessHash = revision.ImagelessHashKeepingPullPolicy(&old.Spec)
	if rec.ImagelessHash == revision.ImagelessHash(&old.Spec) {
		t.Fatalf("the two rules agree on %s; the case tests nothing", rec.ImagelessHash)
	}
	if p := Classify(pod, rec, NewLatest(next)); !p.Upgradable {
		t.Errorf("a pod injected by the previous release is not upgradable by an image change")
	}
	next.Spec.Containers[0].Args = []string{"--verbose"}
	if p := Classify(pod, rec, NewLatest(next)); p.Upgradable {
		t.Errorf("a pod injected by the previous release is upgradable across a change beyond images")
	}
}

// TestDisrupted: what PodDisruptionBudgets count of a pod, over every set's
// record; a deleted set's write counts while it is in flight.
func TestDisrupted(t *testing.T) {
	v1, v2 := testSet("exporter:v1"), testSet("exporter:v2")
	latest := NewLatest(v2)
	written := func() *corev1.Pod { return writtenPod(t, v1, latest) }
	exists := map[string]string{v2.Name: latest.Hash}
	for _, tc := range []struct {
		name   string
		pod    func() *corev1.Pod
		latest map[string]string
		want   bool
	}{
		{"injected, never written", func() *corev1.Pod { return injectedPod("p01", v1) }, exists, false},
		{"written while ready, kubelet not done", written, exists, true},
		{"same, the set deleted: its write is in flight", written, map[string]string{}, true},
		{"written, swapped, not ready yet", func() *corev1.Pod {
			pod := written()
			swap(pod)
			setReady(pod, false)
			return pod
		}, exists, true},
		{"same, the set deleted: its write is done", func() *corev1.Pod {
			pod := written()
			swap(pod)
			setReady(pod, false)
			return pod
		}, map[string]string{}, false},
		{"written, swapped and ready: back", func() *corev1.Pod {
			pod := written()
			swap(pod)
			return pod
		}, exists, false},
	} {
		pod := tc.pod()
		state, err := revision.Decode(pod.Annotations)
		if err != nil {
			t.Fatal(err)
		}
		if got := Disrupted(pod, state, hashed(tc.latest), time.Time{}); got != tc.want {
			t.Errorf("%s: Disrupted = %v, want %v", tc.name, got, tc.want)
		}
		var want []string
		if tc.want {
			want = []string{v2.Name}
		}
		if got := DisruptedBy(pod, state, hashed(tc.latest), time.Time{}); !slices.Equal(got, want) {
			t.Errorf("%s: DisruptedBy = %v, want %v", tc.name, got, want)
		}
	}
}

// othersWrite returns a pod that the set of exporter:v2 wrote over
// exporter:v1 while it was Ready, the kubelet not done, with its records,
// its set's name, and the latest hashes of the sets that exist: with that
// set, or without it when deleted.
func othersWrite(t *testing.T, deleted bool) (*corev1.Pod, revision.State, string, map[string]string) {
	t.Helper()
	v1, v2 := testSet("exporter:v1"), testSet("exporter:v2")
	latest := NewLatest(v2)
	pod := writtenPod(t, v1, latest)
	state, err := revision.Decode(pod.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]string{v2.Name: latest.Hash}
	if deleted {
		exists = map[string]string{}
	}
	return pod, state, v2.Name, exists
}

// TestOthersWriting: what another set's write into a pod tells a set that
// has it back. Only a write no set counts (made while the pod was not
// Ready, or by a deleted set) keeps the pod this set's, while a running
// sidecar of it is still to restart.
func TestOthersWriting(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wasReady bool
		swapped  bool
		deleted  bool
		owed     bool
		want     bool
	}{
		{"written while ready, in flight: its set counts the pod", true, false, false, false, false},
		{"written while ready by a deleted set, in flight: no set counts it", true, false, true, false, true},
		{"written while not ready, in flight", false, false, false, false, true},
		{"written while not ready, done", false, true, false, false, false},
		// Written while not ready, its resize owed: that set writes the
		// resize in a slot of its own, and nothing is in flight till then.
		{"written while not ready, done but for a resize owed", false, true, false, true, false},
	} {
		pod, state, other, exists := othersWrite(t, tc.deleted)
		state[other].Write.WasReady = tc.wasReady
		if tc.swapped {
			swap(pod)
		}
		if tc.owed {
			rc := &state[other].Containers[0]
			rc.Resized, rc.Resources = true, &corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse("64Mi")}}
			if !Classify(pod, state[other], Latest{}).Containers[0].ResizeOwed {
				t.Fatalf("%s: setup: no resize owed", tc.name)
			}
		}
		if got := OthersWriting(pod, state, hashed(exists), time.Time{}); got != tc.want {
			t.Errorf("%s: OthersWriting = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMarkOthers: another set's write in flight holds a Ready pod only
// while that set exists; a pod that is not Ready, whatever set wrote it.
func TestMarkOthers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ready   bool
		deleted bool
		named   bool
	}{
		{"ready, the other set's write in flight", true, false, true},
		{"ready, a deleted set's write in flight", true, true, false},
		{"not ready, a deleted set's write in flight", false, true, true},
	} {
		pod, state, other, exists := othersWrite(t, tc.deleted)
		setReady(pod, tc.ready)
		var want []string
		if tc.named {
			want = []string{other}
		}
		p := Pod{PodReady: tc.ready}
		MarkOthers(&p, pod, state, hashed(exists), time.Time{})
		if !slices.Equal(p.DisruptedBy, want) {
			t.Errorf("%s: DisruptedBy = %v, want %v", tc.name, p.DisruptedBy, want)
		}
	}
}

// TestDisruptionsSpent: a budget's spent disruptions are the pods it
// selects that a rollout has down; a finished pod, or one the budget does
// not select, spends none.
func TestDisruptionsSpent(t *testing.T) {
	v1, v2 := testSet("exporter:v1"), testSet("exporter:v2")
	latest := NewLatest(v2)
	exists := SetsOf([]v1alpha1.SidecarSet{*v2})
	if got := exists[v2.Name].Hash; got != latest.Hash {
		t.Fatalf("SetsOf names %s %q, want %q", v2.Name, got, latest.Hash)
	}
	down := func(name, app string) *corev1.Pod {
		pod := writtenPod(t, v1, latest)
		pod.Name, pod.Labels = name, map[string]string{"app": app}
		return pod
	}
	finished := down("p03", "db")
	finished.Status.Phase = corev1.PodSucceeded
	back := down("p04", "db")
	swap(back)
	pods := []*corev1.Pod{down("p01", "db"), down("p02", "web"), finished, back, injectedPod("p05", v1)}
	d := NewDisruptions(pods, exists, time.Time{})
	for _, tc := range []struct {
		selector string
		want     int32
	}{
		{"app=db", 1},
		{"app=web", 1},
		{"app in (db,web)", 2},
		{"app=cache", 0},
	} {
		sel, err := labels.Parse(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Spent(sel); got != tc.want {
			t.Errorf("Spent(%s) = %d, want %d", tc.selector, got, tc.want)
		}
	}
}

// writtenPod returns a pod injected with from that the controller then moved
// to latest; the kubelet has not acted yet.
func writtenPod(t *testing.T, from *v1alpha1.SidecarSet, latest Latest) *corev1.Pod {
	t.Helper()
	pod := injectedPod("p01", from)
	plan, err := Next(Input{Latest: latest, Pods: []Pod{Classify(pod, record(pod), latest)}})
	if err != nil || len(plan.Updates) != 1 {
		t.Fatalf("setup: plan %+v, err %v", plan, err)
	}
	applyUpdate(pod, plan.Updates[0])
	return pod
}

// TestNotStarted: a running native sidecar whose status says its startup
// probe has not passed is NotStarted; a regular container, or a status
// that does not say (started unset), is not.
func TestNotStarted(t *testing.T) {
	set := testSet("exporter:v1")
	for _, tc := range []struct {
		name      string
		container string
		started   *bool
		want      bool
	}{
		{"native sidecar, startup probe not passed", "shipper", new(false), true},
		{"native sidecar, started", "shipper", new(true), false},
		{"native sidecar, started unset", "shipper", nil, false},
		{"regular sidecar, startup probe not passed", "exporter", new(false), false},
	} {
		pod := injectedPod("p01", set)
		for _, statuses := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
			for i := range statuses {
				if statuses[i].Name == tc.container {
					statuses[i].Started = tc.started
				}
			}
		}
		c, ok := Classify(pod, record(pod), NewLatest(set)).container(tc.container)
		if !ok {
			t.Fatalf("%s: no container %s", tc.name, tc.container)
		}
		if c.NotStarted != tc.want {
			t.Errorf("%s: NotStarted = %v, want %v", tc.name, c.NotStarted, tc.want)
		}
	}
}

// TestReleased: a pod written while Ready counts as disrupted until it has
// been Ready for the write's minReadySeconds, from the later of its Ready
// condition's turn and its written sidecars' starts; the app's start and
// other sidecars' do not count. Minute 0 is the write, minReadySeconds 10,
// and the pod is judged at 0:30.
func TestReleased(t *testing.T) {
	v1, v2 := testSet("exporter:v1"), testSet("exporter:v2")
	latest := NewLatest(v2)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	latest.Now = at.Add(30 * time.Second)
	after := func(d time.Duration) metav1.Time { return metav1.NewTime(at.Add(d)) }
	// back: written at, swapped by the kubelet, ready again.
	back := func(t *testing.T) *corev1.Pod {
		pod := writtenPod(t, v1, latest)
		rec := record(pod)
		rec.Write.At = &metav1.MicroTime{Time: at}
		rec.Write.MinReadySeconds = 10
		setRecord(pod, rec)
		swap(pod)
		setReady(pod, true)
		return pod
	}
	readySince := func(pod *corev1.Pod, tt metav1.Time) { pod.Status.Conditions[0].LastTransitionTime = tt }
	started := func(pod *corev1.Pod, name string, tt metav1.Time) {
		for i := range pod.Status.ContainerStatuses {
			if pod.Status.ContainerStatuses[i].Name == name {
				pod.Status.ContainerStatuses[i].State.Running.StartedAt = tt
			}
		}
	}
	tests := []struct {
		name string
		pod  func(*corev1.Pod)
		// want is ReleaseAt; zero: released, Back and not Disrupting.
		want time.Time
	}{
		{"ready since 0:10, the sidecar started 0:05: released at 0:20", func(pod *corev1.Pod) {
			readySince(pod, after(10*time.Second))
			started(pod, "exporter", after(5*time.Second))
		}, time.Time{}},
		{"ready since 0:10, the sidecar started again at 0:25 (a crash without a probe)", func(pod *corev1.Pod) {
			readySince(pod, after(10*time.Second))
			started(pod, "exporter", after(25*time.Second))
		}, at.Add(35 * time.Second)},
		{"ready since 0:25", func(pod *corev1.Pod) { readySince(pod, after(25*time.Second)) }, at.Add(35 * time.Second)},
		{"the app restarted at 0:25: not the write's", func(pod *corev1.Pod) {
			readySince(pod, after(10*time.Second))
			started(pod, "mysql", after(25*time.Second))
		}, time.Time{}},
		{"a sidecar the write left alone started at 0:25: not the write's", func(pod *corev1.Pod) {
			rec := record(pod)
			rec.Containers = append(rec.Containers, revision.ContainerState{Name: "shipper", Image: "shipper:1"})
			setRecord(pod, rec)
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "shipper", Image: "shipper:1"})
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, running("shipper", "shipper:1"))
			readySince(pod, after(10*time.Second))
			started(pod, "shipper", after(25*time.Second))
		}, time.Time{}},
		{"minReadySeconds 0: released once Ready", func(pod *corev1.Pod) {
			rec := record(pod)
			rec.Write.MinReadySeconds = 0
			setRecord(pod, rec)
			readySince(pod, after(29*time.Second))
		}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := back(t)
			tt.pod(pod)
			p := Classify(pod, record(pod), latest)
			if !p.ReleaseAt.Equal(tt.want) {
				t.Errorf("ReleaseAt = %v, want %v", p.ReleaseAt, tt.want)
			}
			released := tt.want.IsZero()
			if p.Back != released || p.Disrupting == released || p.Available != released || !p.Ready {
				t.Errorf("Back %v, Disrupting %v, Available %v, Ready %v; want released %v, Ready", p.Back, p.Disrupting, p.Available, p.Ready, released)
			}
		})
	}
}

// TestOldSidecarRestartedBeforeTheKubeletActs: the kubelet publishes a
// sync's status, at the write's generation, before it acts on the written
// spec; if the old sidecar crashed meanwhile, that status shows it
// restarted (a new containerID, the old image) and the pod Ready. The
// containerID alone took that for the update done and freed the slot; the
// kubelet then restarted the pod's sidecar beside the next pod's. Counting
// minReadySeconds from that container's start is not enough either: the
// kubelet may take the pod's terminationGracePeriodSeconds to stop it. A
// new container that runs the old content under another name than the one
// written counts as started grace+10s later; the status cannot tell it
// from the write's container of a tag that shares the old content, which
// is therefore released that much later too.
func TestOldSidecarRestartedBeforeTheKubeletActs(t *testing.T) {
	v1, v2 := testSet("exporter:v1"), testSet("exporter:v2")
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name            string
		minReadySeconds int32
		grace           *int64
		// running is the sidecar's new container, started 2s after the
		// write; now is how long after the write Classify runs.
		running corev1.ContainerStatus
		now     time.Duration
		// wantReleaseAt, after the write; zero: released.
		wantReleaseAt time.Duration
	}{
		{"minReadySeconds 10: held past the grace period", 10, nil, running("exporter", "exporter:v1"), 3 * time.Second, 52 * time.Second},
		{"minReadySeconds 0: held as long", 0, nil, running("exporter", "exporter:v1"), 3 * time.Second, 42 * time.Second},
		{"a grace period of 5s", 0, ptr.To[int64](5), running("exporter", "exporter:v1"), 3 * time.Second, 17 * time.Second},
		{"released once that has passed", 0, nil, running("exporter", "exporter:v1"), 43 * time.Second, 0},
		{"the written image's own container: released", 0, nil, running("exporter", "exporter:v2"), 3 * time.Second, 0},
		{"a tag of the old content the runtime names as written: released", 0, nil, runningAs("exporter:v2", "exporter:v1"), 3 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			latest := NewLatest(v2)
			pod := writtenPod(t, v1, latest)
			pod.Spec.TerminationGracePeriodSeconds = tc.grace
			rec := record(pod)
			rec.Write.At, rec.Write.MinReadySeconds = &metav1.MicroTime{Time: at}, tc.minReadySeconds
			setRecord(pod, rec)
			restarted := tc.running
			restarted.ContainerID = "containerd://exporter-2"
			restarted.State.Running.StartedAt = metav1.NewTime(at.Add(2 * time.Second))
			pod.Status.ContainerStatuses[1] = restarted
			pod.Status.ObservedGeneration = pod.Generation
			setReady(pod, true)
			pod.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at.Add(2 * time.Second))
			latest.Now = at.Add(tc.now)
			p := Classify(pod, record(pod), latest)
			held := tc.wantReleaseAt != 0
			if want := at.Add(tc.wantReleaseAt); held && !p.ReleaseAt.Equal(want) || !held && !p.ReleaseAt.IsZero() {
				t.Errorf("ReleaseAt = %v, want %v after the write (0: none)", p.ReleaseAt.Sub(at), tc.wantReleaseAt)
			}
			if p.Disrupting != held || p.Back == held {
				t.Errorf("Disrupting %v, Back %v; want Disrupting %v", p.Disrupting, p.Back, held)
			}
		})
	}
}

// TestWriteWhileTheSidecarIsCreated: a write into a pod whose sidecar the
// kubelet is still creating (no container yet) records that none ran. The
// kubelet may then start the container from the spec before the write and
// show it at the write's generation, the pod Ready, just before it
// replaces it: that container is not the write's, and the pod, now Ready
// with its restart to come, counts (found by TestModel,
// -rapid.seed=15968413483940429006, where it was taken for the write's and
// a later undo waited for ever).
func TestWriteWhileTheSidecarIsCreated(t *testing.T) {
	v1, v2 := testSet("exporter:v1"), testSet("exporter:v2")
	latest := NewLatest(v2)
	pod := injectedPod("p01", v1)
	pod.Status.ContainerStatuses[1] = corev1.ContainerStatus{Name: "exporter",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	setReady(pod, false)
	plan, err := Next(Input{Latest: latest, Pods: []Pod{Classify(pod, record(pod), latest)}, Strategy: strategy("0", "1")})
	if err != nil || len(plan.Updates) != 1 {
		t.Fatalf("plan %+v, err %v", plan, err)
	}
	applyUpdate(pod, plan.Updates[0])
	if rc := record(pod).Containers[0]; !rc.NoneRan {
		t.Fatalf("record %+v, want NoneRan", rc)
	}
	pod.Status.ObservedGeneration = pod.Generation
	pod.Status.ContainerStatuses[1] = running("exporter", "exporter:v1")
	setReady(pod, true)
	p := Classify(pod, record(pod), latest)
	if !p.Updating || p.Back {
		t.Errorf("the spec before's container: Updating %v, Back %v; want the write in flight", p.Updating, p.Back)
	}
	if plan, _ := Next(Input{Latest: latest, Pods: []Pod{p}, Strategy: strategy("0", "1")}); len(plan.Updates) != 1 ||
		plan.Updates[0].Action != ActionRecordDisruption {
		t.Errorf("updates %+v, want the pod recorded as a disruption", plan.Updates)
	}
	swap(pod)
	setReady(pod, true)
	if p := Classify(pod, record(pod), latest); p.Updating {
		t.Errorf("the written image's container: still Updating")
	}
}

// hashed returns the Sets that give each set of hashes its latest Hash.
func hashed(hashes map[string]string) Sets {
	out := make(Sets, len(hashes))
	for name, h := range hashes {
		out[name] = Latest{Hash: h}
	}
	return out
}
