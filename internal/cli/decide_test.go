package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// The pure decisions of the verbs, table by table.

func setWith(matched int32, partition string, mutate ...func(*v1alpha1.SidecarSet)) *v1alpha1.SidecarSet {
	s := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 2}}
	s.Status.ObservedGeneration = 2
	s.Status.MatchedPods = matched
	if partition != "" {
		p := intstr.Parse(partition)
		s.Spec.UpdateStrategy.Partition = &p
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		name              string
		set               *v1alpha1.SidecarSet
		target, partition int32
		known             bool
	}{
		{"12 matched, 50%", setWith(12, "50%"), 6, 6, true},
		{"partition 5", setWith(12, "5"), 7, 5, true},
		{"33% of 10 rounds up", setWith(10, "33%"), 6, 4, true},
		{"partition above matched", setWith(12, "20"), 0, 12, true},
		{"no partition", setWith(3, ""), 3, 0, true},
		{"selector: unknown", setWith(12, "50%", func(s *v1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}), 12, 0, false},
		{"NotUpdate: unknown", setWith(12, "0", func(s *v1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Type = v1alpha1.NotUpdateStrategy
		}), 12, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, partition, known := target(tc.set)
			if target != tc.target || partition != tc.partition || known != tc.known {
				t.Errorf("target(%s) = %d, %d, %v; want %d, %d, %v", tc.name, target, partition, known, tc.target, tc.partition, tc.known)
			}
		})
	}
}

func TestSnapshotCounts(t *testing.T) {
	s := setWith(12, "50%", func(s *v1alpha1.SidecarSet) {
		s.Status.UpdatedPods, s.Status.UpdatedReadyPods = 4, 3
	})
	if got, want := snapshotOf(s).counts(), "3/6 updated and ready (12 matched, partition 6); 4 updated, 1 not ready"; got != want {
		t.Errorf("counts = %q, want %q", got, want)
	}
	s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{}
	if got, want := snapshotOf(s).counts(), "3 of 12 matched updated and ready; 4 updated, 1 not ready"; got != want {
		t.Errorf("counts with a selector = %q, want %q", got, want)
	}
}

func condition(t string, status metav1.ConditionStatus, reason string) func(*v1alpha1.SidecarSet) {
	return func(s *v1alpha1.SidecarSet) {
		s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: reason + " message"})
	}
}

func counts(updated, updatedReady int32) func(*v1alpha1.SidecarSet) {
	return func(s *v1alpha1.SidecarSet) { s.Status.UpdatedPods, s.Status.UpdatedReadyPods = updated, updatedReady }
}

func TestStepWatch(t *testing.T) {
	start := time.Unix(1000, 0)
	opts := RunOptions{WaitReady: 5 * time.Minute, NotReadyTimeout: time.Minute}
	type read struct {
		at  time.Duration
		set *v1alpha1.SidecarSet
	}
	behind := func(s *v1alpha1.SidecarSet) { s.Status.ObservedGeneration = 1 }
	for _, tc := range []struct {
		name  string
		reads []read
		// done and err are what the last read gives; the ones before must
		// give neither.
		done bool
		err  string
	}{
		{"status behind", []read{{10 * time.Second, setWith(4, "0", behind)}}, false, ""},
		{"Complete", []read{{20 * time.Second, setWith(4, "0", condition(v1alpha1.ConditionComplete, metav1.ConditionTrue, "RolloutComplete"))}}, true, ""},
		{"Complete of an older generation", []read{{20 * time.Second, setWith(4, "0", behind, condition(v1alpha1.ConditionComplete, metav1.ConditionTrue, "RolloutComplete"))}}, false, ""},
		{"Stalled", []read{{20 * time.Second, setWith(4, "0", condition(v1alpha1.ConditionStalled, metav1.ConditionTrue, "ProgressDeadlineExceeded"))}}, false, "Stalled (ProgressDeadlineExceeded)"},
		{"paused by someone", []read{{20 * time.Second, setWith(4, "0", func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = true })}}, false, "spec.updateStrategy.paused was set by someone else"},
		{"not ready, within the timeout", []read{
			{30 * time.Second, setWith(4, "0", counts(3, 2))},
			{89 * time.Second, setWith(4, "0", counts(3, 2))},
		}, false, ""},
		{"not ready, no progress for 1m", []read{
			{30 * time.Second, setWith(4, "0", counts(3, 2))},
			{91 * time.Second, setWith(4, "0", counts(3, 2))},
		}, false, "1 updated pods not ready, and none became ready, for 1m0s"},
		{"a pod became ready: the clock restarts", []read{
			{30 * time.Second, setWith(4, "0", counts(3, 1))},
			{80 * time.Second, setWith(4, "0", counts(3, 2))},
			{130 * time.Second, setWith(4, "0", counts(3, 2))},
		}, false, ""},
		{"step not done within --wait-ready", []read{
			{5 * time.Minute, setWith(4, "0", counts(2, 2))},
		}, false, "not done within 5m0s (--wait-ready)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newStepWatch(2, opts, start)
			for i, r := range tc.reads {
				done, err := w.observe(r.set, start.Add(r.at))
				if i < len(tc.reads)-1 {
					if done || err != nil {
						t.Fatalf("read %d: done %v err %v, want neither yet", i, done, err)
					}
					continue
				}
				if done != tc.done {
					t.Errorf("done = %v, want %v", done, tc.done)
				}
				switch {
				case tc.err == "" && err != nil:
					t.Errorf("error %v, want none", err)
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrAnomaly)):
					t.Errorf("error %v, want an ErrAnomaly containing %q", err, tc.err)
				}
			}
		})
	}
}

func TestParsePartition(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "10": "10", " 5 ": "5", "0%": "0%", "50%": "50%", "100%": "100%"} {
		got, err := parsePartition("--partition", in)
		if err != nil || got.String() != want {
			t.Errorf("parsePartition(%q) = %v, %v; want %s", in, got.String(), err, want)
		}
	}
	for _, in := range []string{"", "-1", "101%", "-5%", "1.5", "5%%", "abc", "99999999999"} {
		if _, err := parsePartition("--partition", in); err == nil {
			t.Errorf("parsePartition(%q) accepted it", in)
		}
	}
	steps, err := parseSteps("90%, 50%,0")
	if err != nil || len(steps) != 3 || steps[1].String() != "50%" || steps[2].Type != intstr.Int {
		t.Errorf("parseSteps = %v, %v", steps, err)
	}
}

func TestParseSteps(t *testing.T) {
	for _, in := range []string{
		"90%,50%,0", "20,10,0", "100%,0%", " 50 , 0 ",
		// A count against a percentage depends on the matched pods: Run
		// skips a step that would raise the partition.
		"90%,5,0", "5,90%",
	} {
		if _, err := parseSteps(in); err != nil {
			t.Errorf("parseSteps(%q): %v", in, err)
		}
	}
	for _, in := range []string{"50,90", "50%,50%", "0,0%", "0%,5", "10,10"} {
		if _, err := parseSteps(in); !errors.Is(err, ErrUsage) {
			t.Errorf("parseSteps(%q): %v, want a usage error", in, err)
		}
	}
}

func TestPodState(t *testing.T) {
	for _, tc := range []struct {
		pod  rollout.Pod
		want string
	}{
		{rollout.Pod{Updated: true, Upgradable: true}, StateUpdated},
		{rollout.Pod{Upgradable: true}, StateOld},
		{rollout.Pod{Upgradable: true, Updating: true, Updated: true}, StateUpdating},
		{rollout.Pod{Upgradable: false}, StateNotUpgradable},
		{rollout.Pod{Upgradable: false, Updated: true}, StateNotUpgradable},
		// A hand edit shows through a change of the set that makes every
		// pod not upgradable.
		{rollout.Pod{Upgradable: false, Drifted: []string{"a"}}, StateDrifted},
		{rollout.Pod{Upgradable: true, Updated: true, Drifted: []string{"a"}}, StateDrifted},
		{rollout.Pod{Upgradable: false, Updating: true, Drifted: []string{"a"}}, StateUpdating},
	} {
		if got := podState(tc.pod); got != tc.want {
			t.Errorf("podState(%+v) = %s, want %s", tc.pod, got, tc.want)
		}
	}
}

func TestNotServing(t *testing.T) {
	waiting := func(reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	}
	for _, tc := range []struct {
		name string
		st   corev1.ContainerStatus
		want string
	}{
		{"no status yet", corev1.ContainerStatus{}, ""},
		{"running and ready", corev1.ContainerStatus{Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}, ""},
		{"running, its probe failing", corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}, "NotReady"},
		{"the image does not pull", waiting("ErrImagePull"), "ErrImagePull"},
		{"backed off between pulls", waiting("ImagePullBackOff"), "ImagePullBackOff"},
		{"crashing", waiting("CrashLoopBackOff"), "CrashLoopBackOff"},
		{"being created", waiting("ContainerCreating"), "ContainerCreating"},
		{"waiting without a reason", waiting(""), "Waiting"},
		{"ended", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}, "Error"},
		{"ended without a reason", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}, "Terminated"},
	} {
		if got := notServing(tc.st); got != tc.want {
			t.Errorf("%s: notServing() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestShortImageID(t *testing.T) {
	for in, want := range map[string]string{
		"docker.io/library/x@sha256:0123456789abcdef0123": "sha256:0123456789ab",
		"sha256:0123456789abcdef":                         "sha256:0123456789ab",
		"sha256:abc":                                      "sha256:abc",
		"":                                                "<none>",
	} {
		if got := shortImageID(in); got != want {
			t.Errorf("shortImageID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestJudgeValidation(t *testing.T) {
	for _, tc := range []struct {
		err      error
		answered bool
		detail   string
	}{
		{nil, false, "no validating webhook is registered"},
		{errors.New(`admission webhook "sidecarsets.sidecarset.dev" denied the request: spec.selector: Invalid`), true, "refused the invalid probe SidecarSet (empty selector, dry run), as it should"},
		{errors.New(`Internal error occurred: failed calling webhook "sidecarsets.sidecarset.dev": connection refused`), false, "registered but not answering"},
		{errors.New("forbidden"), false, "dry-run create of a probe SidecarSet failed: forbidden"},
		{errors.New(`admission webhook "policy.example.com" denied the request: no`), false, `another admission webhook, "policy.example.com", refused the probe SidecarSet before ours answered`},
	} {
		answered, detail := judgeValidation(tc.err)
		if answered != tc.answered || !strings.Contains(detail, tc.detail) {
			t.Errorf("judgeValidation(%v) = %v, %q; want %v and %q", tc.err, answered, detail, tc.answered, tc.detail)
		}
	}
}

func TestRolledOut(t *testing.T) {
	deploy := func(st appsv1.DeploymentStatus) *appsv1.Deployment {
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}, Status: st}
	}
	sts := func(st appsv1.StatefulSetStatus) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}, Status: st}
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
		done bool
		msg  string
	}{
		{"deployment not observed", deploy(appsv1.DeploymentStatus{ObservedGeneration: 1}), false, "waiting for the Deployment controller"},
		{"deployment updating", deploy(appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 1, Replicas: 3}), false, "1 of 2 new replicas updated"},
		{"deployment old pods left", deploy(appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 2, Replicas: 3}), false, "1 old replicas pending termination"},
		{"deployment unavailable", deploy(appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 2, Replicas: 2, AvailableReplicas: 1}), false, "1 of 2 updated replicas available"},
		{"deployment done", deploy(appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 2, Replicas: 2, AvailableReplicas: 2}), true, "rolled out"},
		{"statefulset revision moving", sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 2, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "b"}), false, "1 of 2 replicas updated"},
		{"statefulset done", sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 2, UpdatedReplicas: 2, CurrentRevision: "b", UpdateRevision: "b"}), true, "rolled out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, msg, err := rolledOut(tc.obj, 2)
			if err != nil || done != tc.done || !strings.Contains(msg, tc.msg) {
				t.Errorf("rolledOut = %v, %q, %v; want %v and %q", done, msg, err, tc.done, tc.msg)
			}
		})
	}
	_, _, err := rolledOut(deploy(appsv1.DeploymentStatus{ObservedGeneration: 2, Conditions: []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded", Message: "too slow"}}}), 2)
	if diff := cmp.Diff("rollout exceeded its progress deadline: too slow", errString(err)); diff != "" {
		t.Errorf("deadline exceeded (-want +got):\n%s", diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
