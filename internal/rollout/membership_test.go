package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

func TestMemberOf(t *testing.T) {
	set := testSet("exporter:v1")
	rec := revision.SetState{Revision: setName + "-1", Hash: "h1", ImagelessHash: "i1",
		Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:v1"}}}
	other := revision.SetState{Revision: "other-1", Hash: "h2", ImagelessHash: "i2"}
	both := revision.Encode(revision.State{setName: rec, "other": other})
	managed := map[string]string{"app": "db", v1alpha1.LabelManaged: "true"}
	plain := map[string]string{"app": "db"}
	canaryLabels := map[string]string{"app": "db", "track": "canary"}
	canary := testutil.SidecarSet("other").Selector(canaryLabels).Container("exporter", "exporter:v2").CanaryOf(setName).Obj()
	now := metav1.Now()

	cases := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		phase       corev1.PodPhase
		deleting    bool
		namespace   string
		want        Membership
		// wantRecord is compared for Managed pods.
		wantRecord revision.SetState
		// set replaces the set under test; canaries are passed to MemberOf.
		set      *v1alpha1.SidecarSet
		canaries []*v1alpha1.SidecarSet
	}{
		{name: "selector does not match", labels: map[string]string{"app": "web"}, want: NotMatched},
		{name: "manager's namespace", labels: plain, namespace: "sidecarset-system", want: NotMatched},
		{name: "no record", labels: plain, phase: corev1.PodRunning, want: Unmanaged},
		// A metadata list carries no phase: the pod is taken as running.
		{name: "no record, phase unknown", labels: plain, phase: "", want: Unmanaged},
		{name: "no record, Job pod succeeded", labels: plain, phase: corev1.PodSucceeded, want: Finished},
		{name: "no record, failed", labels: plain, phase: corev1.PodFailed, want: Finished},
		{name: "no record, being deleted", labels: plain, deleting: true, want: Finished},
		{name: "managed, succeeded", labels: managed, phase: corev1.PodSucceeded, want: Finished,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "mysql-sidecars,other", v1alpha1.AnnotationState: both}},
		{name: "managed", labels: managed, want: Managed, wantRecord: rec,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "mysql-sidecars,other", v1alpha1.AnnotationState: both}},
		{name: "another set's record only", labels: managed, want: Unmanaged,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "other",
				v1alpha1.AnnotationState: revision.Encode(revision.State{"other": other})}},
		// One set's damaged entry hides the pod from that set only.
		{name: "another set's entry damaged", labels: managed, want: Managed, wantRecord: rec,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "mysql-sidecars,other",
				v1alpha1.AnnotationState: `{"other": {"revision": "other-1"}, "mysql-sidecars": ` + mustEncode(rec) + `}`}},
		{name: "own entry damaged", labels: managed, want: Corrupt,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "mysql-sidecars,other",
				v1alpha1.AnnotationState: `{"mysql-sidecars": {"revision": "x"}, "other": ` + mustEncode(other) + `}`}},
		{name: "state not JSON, named", labels: managed, want: Corrupt,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "mysql-sidecars", v1alpha1.AnnotationState: "{oops"}},
		// Nothing says the set was ever injected: the pod is simply not
		// managed (and not adoptable, Adoptable refuses an unreadable state).
		{name: "state not JSON, not named", labels: managed, want: Unmanaged,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "other", v1alpha1.AnnotationState: "{oops"}},
		{name: "named without an entry", labels: managed, want: Corrupt,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "mysql-sidecars,other",
				v1alpha1.AnnotationState: revision.Encode(revision.State{"other": other})}},
		{name: "entry without the name", labels: managed, want: Corrupt,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "other", v1alpha1.AnnotationState: both}},
		{name: "damaged entry without the name", labels: managed, want: Corrupt,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "other",
				v1alpha1.AnnotationState: `{"mysql-sidecars": 1, "other": ` + mustEncode(other) + `}`}},
		{name: "record without the managed label", labels: plain, want: Corrupt,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "mysql-sidecars,other", v1alpha1.AnnotationState: both}},
		{name: "a set whose name is a prefix is not this one", labels: managed, want: Unmanaged,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "mysql-sidecars-2",
				v1alpha1.AnnotationState: revision.Encode(revision.State{"mysql-sidecars-2": other})}},
		{name: "opted out", labels: plain, want: OptedOut,
			annotations: map[string]string{v1alpha1.AnnotationInject: "false"}},
		{name: "opted out wins over skipped", labels: plain, want: OptedOut,
			annotations: map[string]string{v1alpha1.AnnotationInject: "false", v1alpha1.AnnotationSkipped: "mysql-sidecars"}},
		{name: "skipped", labels: plain, want: Skipped,
			annotations: map[string]string{v1alpha1.AnnotationSkipped: "a,mysql-sidecars"}},
		{name: "another set skipped", labels: plain, want: Unmanaged,
			annotations: map[string]string{v1alpha1.AnnotationSkipped: "other"}},
		// A record is what counts: a skipped mark next to a record (the set
		// was adopted since) does not demote it.
		{name: "skipped, then adopted", labels: managed, want: Managed, wantRecord: rec,
			annotations: map[string]string{v1alpha1.AnnotationSkipped: "mysql-sidecars",
				v1alpha1.AnnotationInjected: "mysql-sidecars,other", v1alpha1.AnnotationState: both}},
		// Canaries: "other" is a canary of the set under test.
		{name: "a canary selects the pod", labels: canaryLabels, want: Replaced, canaries: []*v1alpha1.SidecarSet{canary}},
		{name: "a canary carries the pod's record", labels: managed, want: Replaced, canaries: []*v1alpha1.SidecarSet{canary},
			annotations: map[string]string{v1alpha1.AnnotationInjected: "other", v1alpha1.AnnotationState: revision.Encode(revision.State{"other": other})}},
		{name: "a paused canary hands new pods back", labels: canaryLabels, want: Unmanaged,
			canaries: []*v1alpha1.SidecarSet{testutil.SidecarSet("other").Selector(canaryLabels).CanaryOf(setName).Paused().Obj()}},
		{name: "a canary of another set", labels: canaryLabels, want: Unmanaged,
			canaries: []*v1alpha1.SidecarSet{testutil.SidecarSet("other").Selector(canaryLabels).CanaryOf("elsewhere").Obj()}},
		{name: "the base's own record wins", labels: managed, want: Managed, wantRecord: rec, canaries: []*v1alpha1.SidecarSet{canary},
			annotations: map[string]string{v1alpha1.AnnotationInjected: "mysql-sidecars,other", v1alpha1.AnnotationState: both}},
		{name: "the canary's view: the base's pod", labels: map[string]string{"app": "db", "track": "canary", v1alpha1.LabelManaged: "true"}, want: KeptByBase, set: canary,
			annotations: map[string]string{v1alpha1.AnnotationInjected: "mysql-sidecars", v1alpha1.AnnotationState: revision.Encode(revision.State{setName: rec})}},
		{name: "the canary's view: no record", labels: canaryLabels, want: Unmanaged, set: canary},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.namespace
			if ns == "" {
				ns = testNS
			}
			pod := testutil.Pod(ns, "p").Labels(tc.labels).Annotations(tc.annotations).Container("mysql", "mysql:8").Obj()
			pod.Status.Phase = tc.phase
			if tc.deleting {
				pod.DeletionTimestamp = &now
			}
			s := set
			if tc.set != nil {
				s = tc.set
			}
			got := MemberOf(pod, s, tc.canaries, testutil.Namespace(ns, nil), inject.Options{ManagerNamespace: "sidecarset-system"})
			if got.Membership != tc.want {
				t.Fatalf("MemberOf = %s (%v), want %s", got.Membership, got.Err, tc.want)
			}
			if (got.Err != nil) != (tc.want == Corrupt) {
				t.Errorf("MemberOf error = %v for %s", got.Err, got.Membership)
			}
			if diff := cmp.Diff(tc.wantRecord, got.Record); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMembershipCounts: where each membership counts, as status and
// restart-unmanaged read it.
func TestMembershipCounts(t *testing.T) {
	cases := []struct {
		m                 Membership
		unmanaged, adopts bool
	}{
		{NotMatched, false, false},
		{Finished, false, false},
		{Managed, false, false},
		{Corrupt, true, false},
		{OptedOut, true, false},
		{Skipped, false, true},
		{Unmanaged, true, true},
	}
	for _, tc := range cases {
		if got := tc.m.CountsUnmanaged(); got != tc.unmanaged {
			t.Errorf("%s.CountsUnmanaged() = %v, want %v", tc.m, got, tc.unmanaged)
		}
		if got := tc.m.MayAdopt(); got != tc.adopts {
			t.Errorf("%s.MayAdopt() = %v, want %v", tc.m, got, tc.adopts)
		}
	}
}

func mustEncode(s revision.SetState) string {
	v := revision.Encode(revision.State{"x": s})
	// {"x":<entry>}
	return v[len(`{"x":`) : len(v)-1]
}
