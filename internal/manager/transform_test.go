package manager

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
	"github.com/sidecarset/sidecarset/internal/status"
)

var (
	native  = corev1.ContainerRestartPolicyAlways
	t0      = metav1.Unix(1_700_000_000, 0)
	running = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t0}}
	// exporterResources are exporter's in fullPod; slimPod keeps their cpu
	// and memory (exporterSlim).
	exporterResources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	exporterSlim = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	mysqlResources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	// record names the sidecars exporter and shipper for set a.
	record = revision.Encode(revision.State{"a": {Revision: "a-1", Hash: "h", ImagelessHash: "i",
		Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:1"}, {Name: "shipper", Init: true, Image: "shipper:1"}}}})
)

// fullPod is a managed pod as the apiserver serves it: the sidecars
// exporter and shipper, the app container mysql.
func fullPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "db-0", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 3, CreationTimestamp: t0,
			Labels: map[string]string{"app": "db", "sidecarset.dev/managed": "true"},
			Annotations: map[string]string{
				"sidecarset.dev/state":                             record,
				"sidecarset.dev/injected":                          "a",
				"kubectl.kubernetes.io/last-applied-configuration": "{...}",
			},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			OwnerReferences: []metav1.OwnerReference{{Name: "db"}},
			Finalizers:      []string{"f"},
		},
		Spec: corev1.PodSpec{
			NodeName: "n1",
			InitContainers: []corev1.Container{{Name: "shipper", Image: "shipper:1", RestartPolicy: &native,
				Env: []corev1.EnvVar{{Name: "X", Value: "y"}}}},
			Containers: []corev1.Container{
				{Name: "exporter", Image: "exporter:1", Ports: []corev1.ContainerPort{{ContainerPort: 9104}}, Resources: exporterResources},
				{Name: "mysql", Image: "mysql:8", Command: []string{"mysqld"}, Resources: mysqlResources,
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/mysql"}}},
			},
			Volumes:                       []corev1.Volume{{Name: "data"}},
			Hostname:                      "db-0",
			TerminationGracePeriodSeconds: ptr.To[int64](45),
		},
		Status: corev1.PodStatus{
			Phase:              corev1.PodRunning,
			ObservedGeneration: 2,
			PodIP:              "10.0.0.1",
			HostIP:             "10.1.0.1",
			StartTime:          &t0,
			QOSClass:           corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t0},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t0, LastProbeTime: t0, Reason: "r", Message: "m"},
				{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, LastTransitionTime: t0, ObservedGeneration: 3,
					Reason: corev1.PodReasonDeferred, Message: "Node didn't have enough capacity"},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: t0},
				{Type: v1alpha1.PodConditionUpgradable, Status: corev1.ConditionFalse, Reason: v1alpha1.ReasonUpdateImmutableField,
					Message: "changed: a", LastTransitionTime: t0, ObservedGeneration: 3},
				{Type: status.PodConditionDrifted, Status: corev1.ConditionFalse, Reason: status.ReasonAsWritten, LastTransitionTime: t0},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "shipper", Image: "shipper:1", ImageID: "sha256:s",
				ContainerID: "containerd://s", Ready: true, Started: new(true), State: running}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "exporter", Image: "exporter:1", ImageID: "sha256:e", ContainerID: "containerd://e", Ready: true,
					Started: new(true), RestartCount: 2, State: running, LastTerminationState: running, Resources: &exporterResources,
					AllocatedResources: corev1.ResourceList{}, VolumeMounts: []corev1.VolumeMountStatus{{Name: "v"}}},
				{Name: "mysql", Image: "mysql:8", ImageID: "sha256:1", ContainerID: "containerd://1", Ready: true, State: running},
			},
		},
	}
}

// slimOf is fullPod as the cache keeps it.
func slimOf() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "db-0", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 3, CreationTimestamp: t0,
			Labels:      map[string]string{"app": "db", "sidecarset.dev/managed": "true"},
			Annotations: map[string]string{"sidecarset.dev/state": record, "sidecarset.dev/injected": "a"},
		},
		Spec: corev1.PodSpec{
			NodeName:                      "n1",
			TerminationGracePeriodSeconds: ptr.To[int64](45),
			InitContainers:                []corev1.Container{{Name: "shipper", Image: "shipper:1", RestartPolicy: &native}},
			Containers: []corev1.Container{
				{Name: "exporter", Image: "exporter:1", Resources: exporterSlim},
				{Name: "mysql", Resources: mysqlResources},
			},
		},
		Status: corev1.PodStatus{
			Phase:              corev1.PodRunning,
			ObservedGeneration: 2,
			QOSClass:           corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t0},
				{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred,
					Message: "Node didn't have enough capacity"},
				{Type: v1alpha1.PodConditionUpgradable, Status: corev1.ConditionFalse, Reason: v1alpha1.ReasonUpdateImmutableField,
					Message: "changed: a", LastTransitionTime: t0, ObservedGeneration: 3},
				{Type: status.PodConditionDrifted, Status: corev1.ConditionFalse, Reason: status.ReasonAsWritten, LastTransitionTime: t0},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "shipper", Image: "shipper:1", ImageID: "sha256:s",
				ContainerID: "containerd://s", Ready: true, State: running}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "exporter", Image: "exporter:1", ImageID: "sha256:e",
				ContainerID: "containerd://e", Ready: true, State: running, Resources: &exporterSlim}},
		},
	}
}

func TestSlimPod(t *testing.T) {
	tests := []struct {
		name string
		// edit changes fullPod; want the same in slimOf.
		edit, want func(*corev1.Pod)
	}{{
		// Dropped: managed fields, owners, finalizers, foreign annotations,
		// volumes, hostname (not terminationGracePeriodSeconds), the app container's status and all of it but
		// its name and cpu and memory, every sidecar field but name, image,
		// restart policy and cpu and memory, every status field but name,
		// image, imageID, containerID, state (a running one with its start)
		// and the cpu and memory applied, the pod's IPs, start time, the
		// conditions other than Ready, the resize ones and this project's,
		// and the times of all but Ready's transition and this project's,
		// Ready's reason and message.
		name: "a managed pod",
	}, {
		name: "a waiting container keeps its reason only",
		edit: func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}
		},
		want: func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
		},
	}, {
		name: "a terminated container is neither running nor waiting",
		edit: func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}
		},
		want: func(p *corev1.Pod) { p.Status.ContainerStatuses[0].State = corev1.ContainerState{} },
	}, {
		name: "a not ready pod",
		edit: func(p *corev1.Pod) { p.Status.Conditions[1].Status = corev1.ConditionFalse },
		want: func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse },
	}, {
		name: "a deleted pod in its last phase",
		edit: func(p *corev1.Pod) { p.DeletionTimestamp, p.Status.Phase = &t0, corev1.PodSucceeded },
		want: func(p *corev1.Pod) { p.DeletionTimestamp, p.Status.Phase = &t0, corev1.PodSucceeded },
	}, {
		name: "a per-set record names its containers too",
		edit: func(p *corev1.Pod) {
			p.Annotations[revision.PerSetKey("b")] = `{"revision":"b-1","hash":"h","imagelessHash":"i","containers":[{"name":"mysql","image":"mysql:8"}]}`
		},
		want: func(p *corev1.Pod) {
			p.Annotations[revision.PerSetKey("b")] = `{"revision":"b-1","hash":"h","imagelessHash":"i","containers":[{"name":"mysql","image":"mysql:8"}]}`
			p.Spec.Containers[1] = corev1.Container{Name: "mysql", Image: "mysql:8", Resources: mysqlResources}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "mysql", Image: "mysql:8",
				ImageID: "sha256:1", ContainerID: "containerd://1", Ready: true, State: running})
		},
	}, {
		name: "an unreadable record keeps every container",
		edit: func(p *corev1.Pod) { p.Annotations[v1alpha1.AnnotationState] = "{" },
		want: func(p *corev1.Pod) {
			p.Annotations[v1alpha1.AnnotationState] = "{"
			p.Spec.Containers[1] = corev1.Container{Name: "mysql", Image: "mysql:8", Resources: mysqlResources}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "mysql", Image: "mysql:8",
				ImageID: "sha256:1", ContainerID: "containerd://1", Ready: true, State: running})
		},
	}, {
		name: "no record, no container",
		edit: func(p *corev1.Pod) { delete(p.Annotations, v1alpha1.AnnotationState) },
		want: func(p *corev1.Pod) {
			delete(p.Annotations, v1alpha1.AnnotationState)
			p.Spec.Containers, p.Spec.InitContainers = nil, nil
			p.Status.ContainerStatuses, p.Status.InitContainerStatuses = nil, nil
		},
	}, {
		name: "no conditions, labels or annotations of ours",
		edit: func(p *corev1.Pod) {
			p.Labels, p.Status.Conditions = nil, nil
			p.Annotations = map[string]string{"other": "x"}
		},
		want: func(p *corev1.Pod) {
			p.Labels, p.Annotations, p.Status.Conditions = nil, nil, nil
			p.Spec.Containers, p.Spec.InitContainers = nil, nil
			p.Status.ContainerStatuses, p.Status.InitContainerStatuses = nil, nil
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			full, want := fullPod(), slimOf()
			if tt.edit != nil {
				tt.edit(full)
				tt.want(want)
			}
			before := full.DeepCopy()
			got, err := slimPod(full)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("slimPod (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, full); diff != "" {
				t.Errorf("slimPod changed its input (-before +after):\n%s", diff)
			}
		})
	}
	other := &corev1.Namespace{}
	if got, _ := slimPod(other); got != other {
		t.Errorf("slimPod changed a non-pod")
	}
}

// TestSlimPodSharesStrings: two pods decoded apart hold one copy of the
// strings they repeat, and their own copy of those they do not.
func TestSlimPodSharesStrings(t *testing.T) {
	a, b := fullPod(), fullPod()
	// As a decoder gives them: each pod's strings in memory of their own.
	b.Spec.Containers[0].Image = string([]byte(a.Spec.Containers[0].Image))
	b.Namespace = string([]byte(a.Namespace))
	b.ResourceVersion = string([]byte(a.ResourceVersion))
	sa, _ := slimPod(a)
	sb, _ := slimPod(b)
	pa, pb := sa.(*corev1.Pod), sb.(*corev1.Pod)
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	if !same(pa.Spec.Containers[0].Image, pb.Spec.Containers[0].Image) || !same(pa.Namespace, pb.Namespace) {
		t.Errorf("the image and namespace of two pods are not shared")
	}
	if same(pa.ResourceVersion, pb.ResourceVersion) {
		t.Errorf("the resourceVersions of two pods are shared")
	}
}

func TestInterner(t *testing.T) {
	in := newInterner[string](3)
	self := func(k string) string { return k }
	first := in.get(string([]byte("x")), self)
	if got := in.get(string([]byte("x")), self); unsafe.StringData(got) != unsafe.StringData(first) {
		t.Errorf("a string seen before is not shared")
	}
	for i := range 3 {
		in.get(fmt.Sprint(i), self)
	}
	if len(in.seen) > 3 {
		t.Errorf("the interner holds %d strings, over its limit of 3", len(in.seen))
	}
	if got := intern(""); got != "" {
		t.Errorf("intern(\"\") = %q", got)
	}
}

// TestSlimPodSharesMaps: pods with the same labels and records share one
// map of each; a pod whose differ has its own.
func TestSlimPodSharesMaps(t *testing.T) {
	a, b, c := fullPod(), fullPod(), fullPod()
	c.Labels["statefulset.kubernetes.io/pod-name"] = "db-2"
	c.Annotations[v1alpha1.AnnotationInjected] = "a,b"
	slim := func(p *corev1.Pod) *corev1.Pod {
		s, err := slimPod(p)
		if err != nil {
			t.Fatal(err)
		}
		return s.(*corev1.Pod)
	}
	sa, sb, sc := slim(a), slim(b), slim(c)
	same := func(x, y map[string]string) bool {
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	if !same(sa.Labels, sb.Labels) || !same(sa.Annotations, sb.Annotations) {
		t.Errorf("two pods with the same labels and records do not share their maps")
	}
	if same(sa.Labels, sc.Labels) || same(sa.Annotations, sc.Annotations) {
		t.Errorf("pods with other labels and records share their maps")
	}
	if diff := cmp.Diff(map[string]string{"app": "db", "sidecarset.dev/managed": "true", "statefulset.kubernetes.io/pod-name": "db-2"}, sc.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

// TestSlimPodJudgedAlike: whatever the pod, the controller judges the
// cached pod as it would the full one: same activity, same classification
// by each set, same disruption, same pod conditions of its own.
func TestSlimPodJudgedAlike(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pod, state := genPod(t)
		got, err := slimPod(pod)
		if err != nil {
			t.Fatal(err)
		}
		slim := got.(*corev1.Pod)
		if rollout.Active(pod) != rollout.Active(slim) {
			t.Fatalf("Active differs")
		}
		latest := rollout.Latest{Name: "a-2", Hash: "h2", ImagelessHash: "i",
			Containers: map[string]string{"exporter": rapid.SampledFrom(images).Draw(t, "latest")}}
		hashes := rollout.Sets{}
		for name, rec := range state {
			hashes[name] = rollout.Latest{Hash: "h2"}
			if diff := cmp.Diff(rollout.Classify(pod, rec, latest), rollout.Classify(slim, rec, latest)); diff != "" {
				t.Fatalf("Classify by %s (-full +slim):\n%s", name, diff)
			}
		}
		if rollout.Disrupted(pod, state, hashes, time.Time{}) != rollout.Disrupted(slim, state, hashes, time.Time{}) {
			t.Fatalf("Disrupted differs")
		}
		v := status.PodVerdict{NotUpgradable: rapid.Bool().Draw(t, "notUpgradable")}
		if rapid.Bool().Draw(t, "drifted") {
			v.Drifted = []string{"exporter"}
		}
		now := metav1.Unix(1_800_000_000, 0)
		fu, su := status.PodConditions(pod.Status.Conditions, "a", v, now), status.PodConditions(slim.Status.Conditions, "a", v, now)
		if fu.Changed != su.Changed || fu.NewlyDrifted != su.NewlyDrifted || fu.NewlyNotUpgradable != su.NewlyNotUpgradable {
			t.Fatalf("PodConditions decides apart: full %+v, slim %+v", fu, su)
		}
		if diff := cmp.Diff(ownConditions(fu.Conditions), ownConditions(su.Conditions), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("PodConditions (-full +slim):\n%s", diff)
		}
	})
}

var (
	// times are before, at and after a write made at t0 + 10s.
	times       = []metav1.Time{t0, metav1.NewTime(t0.Add(10 * time.Second)), metav1.NewTime(t0.Add(30 * time.Second))}
	images      = []string{"exporter:1", "exporter:2", "exporter@sha256:e2", "mysql:8"}
	imageIDs    = []string{"", "sha256:e1", "docker.io/exporter@sha256:e2", "sha256:m"}
	containerID = []string{"", "containerd://1", "containerd://2"}
	waiting     = []string{"ContainerCreating", "ImagePullBackOff", "CrashLoopBackOff", "PodInitializing"}
)

// genPod draws a pod whose sidecars exporter and shipper (an init
// container, native or not) are recorded by sets a and maybe b, next to the
// app container mysql, and its records.
func genPod(t *rapid.T) (*corev1.Pod, revision.State) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Generation: rapid.Int64Range(1, 4).Draw(t, "generation"),
		Labels: map[string]string{"app": "x"}}}
	if rapid.Bool().Draw(t, "deleted") {
		pod.DeletionTimestamp = &t0
	}
	pod.Status.Phase = rapid.SampledFrom([]corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}).Draw(t, "phase")
	pod.Status.ObservedGeneration = rapid.Int64Range(0, 4).Draw(t, "observed")
	shipper := corev1.Container{Name: "shipper", Image: rapid.SampledFrom(images).Draw(t, "shipper")}
	if rapid.Bool().Draw(t, "native") {
		shipper.RestartPolicy = &native
	}
	pod.Spec.InitContainers = []corev1.Container{shipper}
	for _, name := range []string{"exporter", "mysql"} {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, Image: rapid.SampledFrom(images).Draw(t, name),
			Env: []corev1.EnvVar{{Name: "A", Value: "b"}}})
	}
	genStatus := func(name, image string) corev1.ContainerStatus {
		st := corev1.ContainerStatus{Name: name, Image: rapid.SampledFrom(append(images, image)).Draw(t, name+"/image"),
			ImageID: rapid.SampledFrom(imageIDs).Draw(t, name+"/imageID"), ContainerID: rapid.SampledFrom(containerID).Draw(t, name+"/id"),
			Ready: rapid.Bool().Draw(t, name+"/ready"), RestartCount: rapid.Int32Range(0, 3).Draw(t, name+"/restarts")}
		switch rapid.IntRange(0, 3).Draw(t, name+"/state") {
		case 1:
			st.State.Running = &corev1.ContainerStateRunning{StartedAt: rapid.SampledFrom(times).Draw(t, name+"/startedAt")}
		case 2:
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: rapid.SampledFrom(waiting).Draw(t, name+"/reason"), Message: "m"}
		case 3:
			st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1}
		}
		return st
	}
	if rapid.Bool().Draw(t, "initStatus") {
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{genStatus("shipper", shipper.Image)}
	}
	for _, c := range pod.Spec.Containers {
		if rapid.Bool().Draw(t, c.Name+"/hasStatus") {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, genStatus(c.Name, c.Image))
		}
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReady, v1alpha1.PodConditionUpgradable, status.PodConditionDrifted} {
		if rapid.Bool().Draw(t, string(typ)) {
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: typ,
				LastTransitionTime: rapid.SampledFrom(times).Draw(t, string(typ)+"/since"),
				Status:             rapid.SampledFrom([]corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse}).Draw(t, string(typ)+"/status")})
		}
	}
	state := revision.State{}
	sets := []struct {
		name       string
		containers []string
	}{{"a", []string{"exporter", "shipper"}}, {"b", []string{"mysql"}}}
	for _, s := range sets {
		if s.name != "a" && !rapid.Bool().Draw(t, s.name) {
			continue
		}
		rec := revision.SetState{Revision: s.name + "-1", Hash: rapid.SampledFrom([]string{"h1", "h2"}).Draw(t, s.name+"/hash"), ImagelessHash: "i"}
		if rapid.Bool().Draw(t, s.name+"/write") {
			rec.Write = &revision.Write{WasReady: rapid.Bool().Draw(t, s.name+"/wasReady"), Generation: rapid.Int64Range(1, 4).Draw(t, s.name+"/gen")}
			if rapid.Bool().Draw(t, s.name+"/at") {
				rec.Write.At = &metav1.MicroTime{Time: t0.Add(10 * time.Second)}
			}
		}
		for _, name := range s.containers {
			rc := revision.ContainerState{Name: name, Init: name == "shipper", Image: rapid.SampledFrom(images).Draw(t, s.name+name)}
			if rapid.Bool().Draw(t, s.name+name+"/written") {
				rc.PreviousImageID = rapid.SampledFrom(imageIDs).Draw(t, s.name+name+"/prevID")
				rc.PreviousContainerID = rapid.SampledFrom(containerID).Draw(t, s.name+name+"/prevCID")
				rc.PreviousImage = rapid.SampledFrom(images).Draw(t, s.name+name+"/prevImage")
			}
			rec.Containers = append(rec.Containers, rc)
		}
		state[s.name] = rec
	}
	pod.Annotations = map[string]string{v1alpha1.AnnotationState: revision.Encode(state), v1alpha1.AnnotationInjected: "a"}
	return pod, state
}

// ownConditions returns this project's pod conditions of conds.
func ownConditions(conds []corev1.PodCondition) []corev1.PodCondition {
	return slices.DeleteFunc(slices.Clone(conds), func(c corev1.PodCondition) bool {
		return c.Type != v1alpha1.PodConditionUpgradable && c.Type != status.PodConditionDrifted
	})
}
