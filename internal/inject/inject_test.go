package inject_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// Images by digest, so only the cases about tags get the tag warning.
const (
	appImage      = "registry.example/app@sha256:a1"
	setupImage    = "registry.example/setup@sha256:a2"
	proxyImage    = "registry.example/proxy@sha256:b1"
	logImage      = "registry.example/log@sha256:b2"
	meshImage     = "registry.example/mesh@sha256:b3"
	exporterImage = "registry.example/exporter@sha256:c1"
	waitImage     = "registry.example/wait@sha256:c2"
)

var (
	dbLabels = map[string]string{"app": "db"}
	managed  = map[string]string{v1alpha1.LabelManaged: "true"}
	shop     = testutil.Namespace("shop", map[string]string{"team": "data"})
	opts     = inject.Options{ManagerNamespace: "sidecarset-system"}
)

// guaranteed starts a container with requests equal to limits, which keeps a
// Guaranteed pod Guaranteed and draws no warning about resources.
func guaranteed(name, image string) *testutil.ContainerBuilder {
	return testutil.Container(name, image).Requests("10m", "16Mi").Limits("10m", "16Mi")
}

// dbPod starts the pod most cases use: shop/db-0, labelled app=db, with one
// Guaranteed app container.
func dbPod() *testutil.PodBuilder {
	return testutil.Pod("shop", "db-0").Labels(dbLabels).Containers(guaranteed("app", appImage).Obj())
}

// setA declares the package documentation's SidecarSet "a": proxy (default
// policy), log (AfterAppContainer) and the native sidecar mesh-init.
func setA() *testutil.SidecarSetBuilder {
	return testutil.SidecarSet("a").Selector(dbLabels).
		Containers(guaranteed("proxy", proxyImage).Sidecar(""), guaranteed("log", logImage).Sidecar(v1alpha1.AfterAppContainer)).
		InitContainers(guaranteed("mesh-init", meshImage).RestartAlways().Sidecar(""))
}

// setB declares the package documentation's SidecarSet "b": exporter
// (BeforeAppContainer) and the init container wait (AfterAppContainer).
func setB() *testutil.SidecarSetBuilder {
	return testutil.SidecarSet("b").Selector(dbLabels).
		Containers(guaranteed("exporter", exporterImage).Sidecar(v1alpha1.BeforeAppContainer)).
		InitContainers(guaranteed("wait", waitImage).Sidecar(v1alpha1.AfterAppContainer))
}

// entry is the record Inject writes for set with these containers; a set
// without containers records an empty list, not null.
func entry(set *v1alpha1.SidecarSet, containers ...revision.ContainerState) revision.SetState {
	return revision.SetState{
		Revision:      revision.Name(set.Name, &set.Spec),
		Hash:          revision.Hash(&set.Spec),
		ImagelessHash: revision.ImagelessHash(&set.Spec),
		Containers:    append([]revision.ContainerState{}, containers...),
	}
}

func ctr(name, image string) revision.ContainerState {
	return revision.ContainerState{Name: name, Image: image}
}

func initCtr(name, image string) revision.ContainerState {
	return revision.ContainerState{Name: name, Init: true, Image: image}
}

// records are the annotations that hold state.
func records(state revision.State) map[string]string {
	return map[string]string{
		v1alpha1.AnnotationState:    revision.Encode(state),
		v1alpha1.AnnotationInjected: revision.InjectedNames(state),
	}
}

// aEntry and bEntry are the records of setA and setB injected whole.
func aEntry() revision.SetState {
	return entry(setA().Obj(), ctr("proxy", proxyImage), ctr("log", logImage), initCtr("mesh-init", meshImage))
}

func bEntry() revision.SetState {
	return entry(setB().Obj(), ctr("exporter", exporterImage), initCtr("wait", waitImage))
}

func TestInject(t *testing.T) {
	const keepWarning = `SidecarSet "b" container "exporter" is a regular container in a pod with restartPolicy Never, which never completes while it runs: set the SidecarSet's jobPods to NativeSidecar, or declare the container under initContainers with restartPolicy: Always`
	injectedByA := inject.Inject(dbPod().Obj(), shop, []*v1alpha1.SidecarSet{setA().Obj()}, opts).Pod
	oldSet := testutil.SidecarSet("old").Selector(dbLabels).Container("old-agent", "registry.example/old@sha256:d1").Obj()
	const corrupted = `{"a": {"revision": ""}}`
	badSelector := testutil.SidecarSet("bad").LabelSelector(&metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near", Values: []string{"db"}}},
	}).Container("x", proxyImage).Obj()

	tests := []struct {
		name string
		pod  *corev1.Pod
		ns   *corev1.Namespace
		sets []*v1alpha1.SidecarSet
		want inject.Result
	}{{
		name: "no set selects the pod: unchanged",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setA().Selector(map[string]string{"app": "web"}).Obj()},
		want: inject.Result{Pod: dbPod().Obj()},
	}, {
		// The package documentation's worked case; the sets come unsorted.
		name: "placement: before and after the pod's containers and init containers, sets by name",
		pod:  dbPod().InitContainers(guaranteed("setup", setupImage).Obj()).Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setB().Obj(), setA().Obj()},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
				Annotations(records(revision.State{"a": aEntry(), "b": bEntry()})).
				Containers(
					guaranteed("proxy", proxyImage).Obj(),
					guaranteed("exporter", exporterImage).Obj(),
					guaranteed("app", appImage).Obj(),
					guaranteed("log", logImage).Obj()).
				InitContainers(
					guaranteed("mesh-init", meshImage).RestartAlways().Obj(),
					guaranteed("setup", setupImage).Obj(),
					guaranteed("wait", waitImage).Obj()).
				Obj(),
			Injected: []string{"a", "b"},
			Changed:  true,
		},
	}, {
		// The package documentation's worked case for a Job's pod.
		name: "restartPolicy Never: the sets' containers go into the init containers as native sidecars, after each set's own",
		pod:  dbPod().RestartPolicy(corev1.RestartPolicyNever).InitContainers(guaranteed("setup", setupImage).Obj()).Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setB().Obj(), setA().Obj()},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).RestartPolicy(corev1.RestartPolicyNever).
				Annotations(records(revision.State{
					"a": entry(setA().Obj(), initCtr("proxy", proxyImage), initCtr("log", logImage), initCtr("mesh-init", meshImage)),
					"b": entry(setB().Obj(), initCtr("exporter", exporterImage), initCtr("wait", waitImage)),
				})).
				Containers(guaranteed("app", appImage).Obj()).
				InitContainers(
					guaranteed("mesh-init", meshImage).RestartAlways().Obj(),
					guaranteed("proxy", proxyImage).RestartAlways().Obj(),
					guaranteed("log", logImage).RestartAlways().Obj(),
					guaranteed("exporter", exporterImage).RestartAlways().Obj(),
					guaranteed("setup", setupImage).Obj(),
					guaranteed("wait", waitImage).Obj()).
				Obj(),
			Injected: []string{"a", "b"},
			Changed:  true,
		},
	}, {
		name: "restartPolicy Never, jobPods Keep: the containers stay regular, with a warning and an event",
		pod:  dbPod().RestartPolicy(corev1.RestartPolicyNever).Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setB().JobPods(v1alpha1.JobPodsKeep).Obj()},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).RestartPolicy(corev1.RestartPolicyNever).
				Annotations(records(revision.State{"b": entry(setB().JobPods(v1alpha1.JobPodsKeep).Obj(), ctr("exporter", exporterImage), initCtr("wait", waitImage))})).
				Containers(guaranteed("exporter", exporterImage).Obj(), guaranteed("app", appImage).Obj()).
				InitContainers(guaranteed("wait", waitImage).Obj()).
				Obj(),
			Injected: []string{"b"},
			Changed:  true,
			Warnings: []string{keepWarning},
			Events:   []inject.Event{{Set: "b", Reason: inject.ReasonInjectionWarning, Message: keepWarning}},
		},
	}, {
		name: "records of sets injected before are kept; other annotations too",
		pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
			Annotations(map[string]string{"team.example/owner": "dba"}).
			Annotations(records(revision.State{"old": entry(oldSet, ctr("old-agent", "registry.example/old@sha256:d1"))})).
			Containers(guaranteed("old-agent", "registry.example/old@sha256:d1").Obj(), guaranteed("app", appImage).Obj()).
			Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setB().Obj(), oldSet},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
				Annotations(map[string]string{"team.example/owner": "dba"}).
				Annotations(records(revision.State{
					"old": entry(oldSet, ctr("old-agent", "registry.example/old@sha256:d1")),
					"b":   bEntry(),
				})).
				Containers(
					guaranteed("exporter", exporterImage).Obj(),
					guaranteed("old-agent", "registry.example/old@sha256:d1").Obj(),
					guaranteed("app", appImage).Obj()).
				InitContainers(guaranteed("wait", waitImage).Obj()).
				Obj(),
			Injected: []string{"b"},
			Changed:  true,
		},
	}, {
		name: "already injected: reinvocation returns the pod unchanged",
		pod:  injectedByA,
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setA().Obj()},
		want: inject.Result{Pod: injectedByA},
	}, {
		name: "already injected at an older revision: left to the controller",
		pod:  injectedByA,
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setA().Containers(guaranteed("extra", proxyImage).Sidecar("")).Obj()},
		want: inject.Result{Pod: injectedByA},
	}, {
		name: "the pod opts out",
		pod:  dbPod().Annotations(map[string]string{v1alpha1.AnnotationInject: "false"}).Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setA().Obj()},
		want: inject.Result{Pod: dbPod().Annotations(map[string]string{v1alpha1.AnnotationInject: "false"}).Obj()},
	}, {
		name: "a paused set injects nothing",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setA().Paused().Obj()},
		want: inject.Result{Pod: dbPod().Obj()},
	}, {
		name: "the pod's own container of a sidecar's name: the set is skipped whole and the pod keeps its own",
		pod:  dbPod().Container("log", "my/log:1").Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setA().Obj()},
		want: inject.Result{
			Pod:      dbPod().Container("log", "my/log:1").Obj(),
			Warnings: []string{`SidecarSet "a" not injected: the pod already has a container named "log", which it keeps`},
		},
	}, {
		name: "a name another set injects first: the later set by name is skipped",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{
			testutil.SidecarSet("z").Selector(dbLabels).Containers(guaranteed("proxy", proxyImage).Sidecar("")).Obj(),
			setA().Obj(),
		},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
				Annotations(records(revision.State{"a": aEntry()})).
				Containers(guaranteed("proxy", proxyImage).Obj(), guaranteed("app", appImage).Obj(), guaranteed("log", logImage).Obj()).
				InitContainers(guaranteed("mesh-init", meshImage).RestartAlways().Obj()).
				Obj(),
			Injected: []string{"a"},
			Changed:  true,
			Warnings: []string{`SidecarSet "z" not injected: container "proxy" is already injected by SidecarSet "a"`},
		},
	}, {
		name: "a set declaring one name as container and init container is skipped",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("twice").Selector(dbLabels).
			Containers(guaranteed("agent", proxyImage).Sidecar("")).
			InitContainers(guaranteed("agent", proxyImage).Sidecar("")).Obj()},
		want: inject.Result{
			Pod:      dbPod().Obj(),
			Warnings: []string{`SidecarSet "twice" not injected: it declares container "agent" twice`},
		},
	}, {
		name: "a container name held by an ephemeral container",
		pod: func() *corev1.Pod {
			p := dbPod().Obj()
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "proxy"}}}
			return p
		}(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setA().Obj()},
		want: inject.Result{
			Pod: func() *corev1.Pod {
				p := dbPod().Obj()
				p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "proxy"}}}
				return p
			}(),
			Warnings: []string{`SidecarSet "a" not injected: the pod already has a container named "proxy", which it keeps`},
		},
	}, {
		name: "volumes: the pod's wins, identical ones collapse, differing ones keep the first set's",
		pod:  dbPod().Volumes(testutil.EmptyDirVolume("data")).Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{
			testutil.SidecarSet("c").Selector(dbLabels).Volumes(testutil.HostPathVolume("conf", "/etc/c")).Obj(),
			testutil.SidecarSet("b").Selector(dbLabels).Volumes(testutil.EmptyDirVolume("shared"), testutil.HostPathVolume("conf", "/etc/b")).Obj(),
			testutil.SidecarSet("a").Selector(dbLabels).Volumes(testutil.HostPathVolume("data", "/var/a"), testutil.EmptyDirVolume("shared")).Obj(),
		},
		want: inject.Result{
			Pod: dbPod().Labels(managed).
				Annotations(records(revision.State{
					"a": entry(testutil.SidecarSet("a").Selector(dbLabels).Volumes(testutil.HostPathVolume("data", "/var/a"), testutil.EmptyDirVolume("shared")).Obj()),
					"b": entry(testutil.SidecarSet("b").Selector(dbLabels).Volumes(testutil.EmptyDirVolume("shared"), testutil.HostPathVolume("conf", "/etc/b")).Obj()),
					"c": entry(testutil.SidecarSet("c").Selector(dbLabels).Volumes(testutil.HostPathVolume("conf", "/etc/c")).Obj()),
				})).
				Volumes(testutil.EmptyDirVolume("data"), testutil.EmptyDirVolume("shared"), testutil.HostPathVolume("conf", "/etc/b")).
				Obj(),
			Injected: []string{"a", "b", "c"},
			Changed:  true,
			Warnings: []string{`SidecarSet "c" volume "conf" differs from the one SidecarSet "b" declares; the pod gets SidecarSet "b"'s`},
		},
	}, {
		name: "imagePullSecrets merge by name",
		pod:  dbPod().ImagePullSecrets("regcred").Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{
			testutil.SidecarSet("a").Selector(dbLabels).ImagePullSecrets("regcred", "a-secret").Obj(),
			testutil.SidecarSet("b").Selector(dbLabels).ImagePullSecrets("a-secret", "b-secret").Obj(),
		},
		want: inject.Result{
			Pod: dbPod().Labels(managed).
				Annotations(records(revision.State{
					"a": entry(testutil.SidecarSet("a").Selector(dbLabels).ImagePullSecrets("regcred", "a-secret").Obj()),
					"b": entry(testutil.SidecarSet("b").Selector(dbLabels).ImagePullSecrets("a-secret", "b-secret").Obj()),
				})).
				ImagePullSecrets("regcred", "a-secret", "b-secret").
				Obj(),
			Injected: []string{"a", "b"},
			Changed:  true,
		},
	}, {
		name: "a corrupted state annotation is replaced by the new record; other annotations stay",
		pod:  dbPod().Annotations(map[string]string{v1alpha1.AnnotationState: corrupted, "team.example/owner": "dba"}).Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setB().Obj()},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
				Annotations(map[string]string{"team.example/owner": "dba"}).
				Annotations(records(revision.State{"b": bEntry()})).
				Containers(guaranteed("exporter", exporterImage).Obj(), guaranteed("app", appImage).Obj()).
				InitContainers(guaranteed("wait", waitImage).Obj()).
				Obj(),
			Injected: []string{"b"},
			Changed:  true,
			Warnings: []string{`ignoring the pod's annotation sidecarset.dev/state, which cannot be read (decode annotation sidecarset.dev/state: entry "a" lacks a revision or hash); the record of a SidecarSet injected now replaces it`},
		},
	}, {
		name: "a corrupted state annotation with nothing to inject is left as it is",
		pod:  dbPod().Annotations(map[string]string{v1alpha1.AnnotationState: "{"}).Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setB().Selector(map[string]string{"app": "web"}).Obj()},
		want: inject.Result{
			Pod:      dbPod().Annotations(map[string]string{v1alpha1.AnnotationState: "{"}).Obj(),
			Warnings: []string{`ignoring the pod's annotation sidecarset.dev/state, which cannot be read (decode annotation sidecarset.dev/state: unexpected end of JSON input); the record of a SidecarSet injected now replaces it`},
		},
	}, {
		name: "an invalid selector skips that set only",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{badSelector, setB().Obj()},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
				Annotations(records(revision.State{"b": bEntry()})).
				Containers(guaranteed("exporter", exporterImage).Obj(), guaranteed("app", appImage).Obj()).
				InitContainers(guaranteed("wait", waitImage).Obj()).
				Obj(),
			Injected: []string{"b"},
			Changed:  true,
			Warnings: []string{`SidecarSet "bad" not injected: selector: "Near" is not a valid label selector operator`},
		},
	}, {
		name: "an empty selector is refused rather than selecting every pod",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setB().LabelSelector(&metav1.LabelSelector{}).Obj()},
		want: inject.Result{
			Pod:      dbPod().Obj(),
			Warnings: []string{`SidecarSet "b" not injected: selector is empty, which would select every pod`},
		},
	}, {
		name: "a set without a name is skipped",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("").Selector(dbLabels).Obj()},
		want: inject.Result{
			Pod:      dbPod().Obj(),
			Warnings: []string{"a SidecarSet without a name is not injected"},
		},
	}, {
		name: "kube-system is not injected",
		pod:  testutil.Pod("kube-system", "db-0").Labels(dbLabels).Obj(),
		ns:   testutil.Namespace("kube-system", nil),
		sets: []*v1alpha1.SidecarSet{setA().Obj()},
		want: inject.Result{Pod: testutil.Pod("kube-system", "db-0").Labels(dbLabels).Obj()},
	}, {
		name: "the manager's namespace is not injected",
		pod:  testutil.Pod("sidecarset-system", "db-0").Labels(dbLabels).Obj(),
		ns:   testutil.Namespace("sidecarset-system", nil),
		sets: []*v1alpha1.SidecarSet{setA().Obj()},
		want: inject.Result{Pod: testutil.Pod("sidecarset-system", "db-0").Labels(dbLabels).Obj()},
	}, {
		name: "allow-system-namespaces lets a set into kube-system",
		pod:  testutil.Pod("kube-system", "db-0").Labels(dbLabels).Containers(guaranteed("app", appImage).Obj()).Obj(),
		ns:   testutil.Namespace("kube-system", nil),
		sets: []*v1alpha1.SidecarSet{setB().Annotations(map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "true"}).Obj()},
		want: inject.Result{
			Pod: testutil.Pod("kube-system", "db-0").Labels(dbLabels).Labels(managed).
				Annotations(records(revision.State{"b": entry(
					setB().Annotations(map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "true"}).Obj(),
					ctr("exporter", exporterImage), initCtr("wait", waitImage))})).
				Containers(guaranteed("exporter", exporterImage).Obj(), guaranteed("app", appImage).Obj()).
				InitContainers(guaranteed("wait", waitImage).Obj()).
				Obj(),
			Injected: []string{"b"},
			Changed:  true,
		},
	}, {
		name: "unknown namespace labels: only a set without namespaceSelector matches, by the pod's namespace name",
		pod:  dbPod().Obj(),
		ns:   nil,
		sets: []*v1alpha1.SidecarSet{setA().NamespaceSelector(map[string]string{"team": "data"}).Obj(), setB().Obj()},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
				Annotations(records(revision.State{"b": bEntry()})).
				Containers(guaranteed("exporter", exporterImage).Obj(), guaranteed("app", appImage).Obj()).
				InitContainers(guaranteed("wait", waitImage).Obj()).
				Obj(),
			Injected: []string{"b"},
			Changed:  true,
		},
	}}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod, ns, sets := tc.pod.DeepCopy(), tc.ns.DeepCopy(), deepCopies(tc.sets)
			got := inject.Inject(tc.pod, tc.ns, tc.sets, opts)
			// TestInjectEvents checks the events.
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(inject.Result{}, "Events")); diff != "" {
				t.Errorf("Inject() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(pod, tc.pod); diff != "" {
				t.Errorf("Inject() modified the pod (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(ns, tc.ns); diff != "" {
				t.Errorf("Inject() modified the namespace (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(sets, tc.sets); diff != "" {
				t.Errorf("Inject() modified the sets (-before +after):\n%s", diff)
			}

			again := inject.Inject(got.Pod, tc.ns, tc.sets, opts)
			if len(again.Injected) != 0 || again.Changed {
				t.Errorf("Inject() on its own output injected %v again, changed %v", again.Injected, again.Changed)
			}
			if diff := cmp.Diff(got.Pod, again.Pod); diff != "" {
				t.Errorf("Inject() on its own output changed the pod (-first +second):\n%s", diff)
			}
		})
	}
}

func deepCopies(sets []*v1alpha1.SidecarSet) []*v1alpha1.SidecarSet {
	out := make([]*v1alpha1.SidecarSet, len(sets))
	for i, s := range sets {
		out[i] = s.DeepCopy()
	}
	return out
}

// isReadinessWarning reports whether w is SetWarnings' warning about a
// sidecar without a readiness probe.
func isReadinessWarning(w string) bool {
	return strings.Contains(w, "has no readiness probe: it is Ready as soon as it runs")
}

// TestSetWarningsReadiness: a sidecar that keeps running without a readiness
// probe draws a warning that names minReadySeconds; one with a probe, an
// ordinary init container, and a HotUpgrade sidecar (warned about its exec
// probe instead) draw none.
func TestSetWarningsReadiness(t *testing.T) {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	always := corev1.ContainerRestartPolicyAlways
	set := &v1alpha1.SidecarSet{Spec: v1alpha1.SidecarSetSpec{
		UpdateStrategy: v1alpha1.UpdateStrategy{MinReadySeconds: ptr.To[int32](10)},
		Containers: []v1alpha1.SidecarContainer{
			{Container: corev1.Container{Name: "exporter"}},
			{Container: corev1.Container{Name: "proxy", ReadinessProbe: probe}},
			{Container: corev1.Container{Name: "agent"}, UpgradeStrategy: &v1alpha1.UpgradeStrategy{
				UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: "empty:1"}},
		},
		InitContainers: []v1alpha1.SidecarContainer{
			{Container: corev1.Container{Name: "schema"}},
			{Container: corev1.Container{Name: "shipper", RestartPolicy: &always}},
		},
	}}
	var got []string
	for _, w := range inject.SetWarnings(set) {
		if isReadinessWarning(w) {
			got = append(got, w)
		}
	}
	const note = ` has no readiness probe: it is Ready as soon as it runs, so in a rollout only updateStrategy.minReadySeconds (10) holds a pod whose new image fails soon after it starts; add a probe that says the sidecar serves`
	want := []string{
		`spec.containers[0].readinessProbe: container "exporter"` + note,
		`spec.initContainers[1].readinessProbe: container "shipper"` + note,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readiness warnings (-want +got):\n%s", diff)
	}

	// With minReadySeconds 0 nothing holds such a pod, and the warning
	// says so.
	set.Spec.UpdateStrategy.MinReadySeconds = ptr.To[int32](0)
	const zero = `spec.containers[0].readinessProbe: container "exporter" has no readiness probe: it is Ready as soon as it runs, and with updateStrategy.minReadySeconds 0 nothing holds a pod whose new image fails soon after it starts; add a probe that says the sidecar serves, or set minReadySeconds`
	if got := inject.SetWarnings(set); !slices.Contains(got, zero) {
		t.Errorf("warnings with minReadySeconds 0 %q, want %q among them", got, zero)
	}
}

// TestInjectWarnings says, case by case, which warnings hold for the set
// whatever the pod (SetWarnings, given when the set is applied) and which
// depend on the pod (Inject, given on the pod's create).
func TestInjectWarnings(t *testing.T) {
	bestEffortPod := func() *testutil.PodBuilder {
		return testutil.Pod("shop", "job-0").Labels(dbLabels).Container("app", appImage)
	}
	sidecarSet := func(cs ...v1alpha1.SidecarContainer) *v1alpha1.SidecarSet {
		return testutil.SidecarSet("mesh").Selector(dbLabels).Containers(cs...).Obj()
	}
	nativeSet := func(cs ...v1alpha1.SidecarContainer) *v1alpha1.SidecarSet {
		return testutil.SidecarSet("mesh").Selector(dbLabels).InitContainers(cs...).Obj()
	}
	keep := func(s *v1alpha1.SidecarSet) *v1alpha1.SidecarSet {
		s.Spec.JobPods = v1alpha1.JobPodsKeep
		return s
	}
	withPodResources := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.Resources = &corev1.ResourceRequirements{Limits: guaranteed("", "").Obj().Resources.Limits}
		return p
	}
	const (
		noResources           = `spec.containers[0].resources: container "proxy" has no resource requests or limits: the scheduler reserves nothing for it and nothing caps what it uses, unless the pod declares pod-level resources`
		bestEffortToBurstable = `injection changes the pod's QoS class from BestEffort to Burstable (SidecarSet "mesh" container "proxy")`
	)

	tests := []struct {
		name string
		pod  *corev1.Pod
		sets []*v1alpha1.SidecarSet
		// setWarnings are the SetWarnings of each set, in order;
		// podWarnings are Inject's.
		setWarnings, podWarnings []string
	}{{
		name:        "a sidecar without resources (the pod stays BestEffort): the set's",
		pod:         bestEffortPod().Obj(),
		sets:        []*v1alpha1.SidecarSet{sidecarSet(testutil.Container("proxy", proxyImage).Sidecar(""))},
		setWarnings: []string{noResources},
	}, {
		name:        "a sidecar without resources in a pod with pod-level resources: still the set's, which says so",
		pod:         withPodResources(bestEffortPod().Obj()),
		sets:        []*v1alpha1.SidecarSet{sidecarSet(testutil.Container("proxy", proxyImage).Sidecar(""))},
		setWarnings: []string{noResources},
	}, {
		name:        "an image by tag: the set's, with the field path of the init container",
		pod:         dbPod().Obj(),
		sets:        []*v1alpha1.SidecarSet{nativeSet(guaranteed("proxy", "envoyproxy/envoy:v1.30").RestartAlways().Sidecar(""))},
		setWarnings: []string{`spec.initContainers[0].image: image "envoyproxy/envoy:v1.30" of container "proxy" is a tag, not a digest (@sha256:...): a re-pushed tag makes pods of one revision run different images`},
	}, {
		name: "the worked case of SetWarnings",
		pod:  bestEffortPod().Obj(),
		sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("mesh").Selector(dbLabels).
			Containers(testutil.Container("proxy", "envoy:1").Sidecar("")).
			InitContainers(testutil.Container("mesh-init", meshImage).Requests("10m", "").RestartAlways().Sidecar("")).Obj()},
		setWarnings: []string{
			noResources,
			`spec.containers[0].image: image "envoy:1" of container "proxy" is a tag, not a digest (@sha256:...): a re-pushed tag makes pods of one revision run different images`,
		},
		podWarnings: []string{`injection changes the pod's QoS class from BestEffort to Burstable (SidecarSet "mesh" container "mesh-init")`},
	}, {
		name:        "jobPods Keep: a regular sidecar in a pod with restartPolicy Never, the pod's",
		pod:         dbPod().RestartPolicy(corev1.RestartPolicyNever).Obj(),
		sets:        []*v1alpha1.SidecarSet{keep(sidecarSet(guaranteed("proxy", proxyImage).Sidecar("")))},
		podWarnings: []string{`SidecarSet "mesh" container "proxy" is a regular container in a pod with restartPolicy Never, which never completes while it runs: set the SidecarSet's jobPods to NativeSidecar, or declare the container under initContainers with restartPolicy: Always`},
	}, {
		name:        "jobPods Keep: a regular sidecar in a pod with restartPolicy OnFailure, the pod's",
		pod:         dbPod().RestartPolicy(corev1.RestartPolicyOnFailure).Obj(),
		sets:        []*v1alpha1.SidecarSet{keep(sidecarSet(guaranteed("proxy", proxyImage).Sidecar("")))},
		podWarnings: []string{`SidecarSet "mesh" container "proxy" is a regular container in a pod with restartPolicy OnFailure, which never completes while it runs: set the SidecarSet's jobPods to NativeSidecar, or declare the container under initContainers with restartPolicy: Always`},
	}, {
		name: "jobPods NativeSidecar (the default): a regular sidecar becomes a native one in a pod with restartPolicy Never",
		pod:  dbPod().RestartPolicy(corev1.RestartPolicyNever).Obj(),
		sets: []*v1alpha1.SidecarSet{sidecarSet(guaranteed("proxy", proxyImage).Sidecar(""))},
	}, {
		name: "jobPods NativeSidecar: and in a pod with restartPolicy OnFailure",
		pod:  dbPod().RestartPolicy(corev1.RestartPolicyOnFailure).Obj(),
		sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("mesh").Selector(dbLabels).JobPods(v1alpha1.JobPodsNativeSidecar).Containers(guaranteed("proxy", proxyImage).Sidecar("")).Obj()},
	}, {
		name: "a native sidecar in a pod with restartPolicy Never",
		pod:  dbPod().RestartPolicy(corev1.RestartPolicyNever).Obj(),
		sets: []*v1alpha1.SidecarSet{nativeSet(guaranteed("proxy", proxyImage).RestartAlways().Sidecar(""))},
	}, {
		name: "a regular sidecar in a pod with restartPolicy Always",
		pod:  dbPod().RestartPolicy(corev1.RestartPolicyAlways).Obj(),
		sets: []*v1alpha1.SidecarSet{sidecarSet(guaranteed("proxy", proxyImage).Sidecar(""))},
	}, {
		name: "Guaranteed to Burstable: a sidecar with requests only, the pod's",
		pod:  dbPod().Obj(),
		sets: []*v1alpha1.SidecarSet{sidecarSet(
			guaranteed("exporter", exporterImage).Sidecar(""),
			testutil.Container("proxy", proxyImage).Requests("10m", "16Mi").Sidecar(""))},
		podWarnings: []string{`injection changes the pod's QoS class from Guaranteed to Burstable (SidecarSet "mesh" container "proxy"): under node pressure the pod is now OOM-killed and evicted before Guaranteed pods; give the sidecar limits equal to its requests to keep it Guaranteed`},
	}, {
		name: "Guaranteed to Burstable: one warning names every sidecar that did it, across sets",
		pod:  dbPod().Obj(),
		sets: []*v1alpha1.SidecarSet{
			sidecarSet(testutil.Container("proxy", proxyImage).Limits("10m", "").Sidecar("")),
			testutil.SidecarSet("logs").Selector(dbLabels).InitContainers(testutil.Container("shipper", logImage).Limits("", "32Mi").RestartAlways().Sidecar("")).Obj(),
		},
		podWarnings: []string{`injection changes the pod's QoS class from Guaranteed to Burstable (SidecarSet "logs" container "shipper", SidecarSet "mesh" container "proxy"): under node pressure the pod is now OOM-killed and evicted before Guaranteed pods; give the sidecar limits equal to its requests to keep it Guaranteed`},
	}, {
		name:        "BestEffort to Burstable",
		pod:         bestEffortPod().Obj(),
		sets:        []*v1alpha1.SidecarSet{sidecarSet(guaranteed("proxy", proxyImage).Sidecar(""))},
		podWarnings: []string{bestEffortToBurstable},
	}, {
		// The apiserver defaults requests from limits after the webhook.
		name: "a sidecar with limits only keeps the pod Guaranteed",
		pod:  dbPod().Obj(),
		sets: []*v1alpha1.SidecarSet{sidecarSet(testutil.Container("proxy", proxyImage).Limits("10m", "16Mi").Sidecar(""))},
	}, {
		name: "pod-level resources decide the QoS class alone",
		pod:  withPodResources(dbPod().Obj()),
		sets: []*v1alpha1.SidecarSet{sidecarSet(testutil.Container("proxy", proxyImage).Requests("10m", "").Sidecar(""))},
	}, {
		name: "the pod's warnings come set by set, then the QoS change; the sets' are not among them",
		pod:  dbPod().RestartPolicy(corev1.RestartPolicyNever).Obj(),
		sets: []*v1alpha1.SidecarSet{
			testutil.SidecarSet("z").Selector(dbLabels).JobPods(v1alpha1.JobPodsKeep).Container("agent", "agent:2").Obj(),
			testutil.SidecarSet("m").Obj(),
			testutil.SidecarSet("a").Selector(dbLabels).InitContainers(guaranteed("proxy", "envoy:1").RestartAlways().Sidecar("")).Obj(),
		},
		setWarnings: []string{
			`spec.containers[0].resources: container "agent" has no resource requests or limits: the scheduler reserves nothing for it and nothing caps what it uses, unless the pod declares pod-level resources`,
			`spec.containers[0].image: image "agent:2" of container "agent" is a tag, not a digest (@sha256:...): a re-pushed tag makes pods of one revision run different images`,
			`spec.initContainers[0].image: image "envoy:1" of container "proxy" is a tag, not a digest (@sha256:...): a re-pushed tag makes pods of one revision run different images`,
		},
		podWarnings: []string{
			`SidecarSet "m" not injected: selector is empty, which would select every pod`,
			`SidecarSet "z" container "agent" is a regular container in a pod with restartPolicy Never, which never completes while it runs: set the SidecarSet's jobPods to NativeSidecar, or declare the container under initContainers with restartPolicy: Always`,
			`injection changes the pod's QoS class from Guaranteed to Burstable (SidecarSet "z" container "agent"): under node pressure the pod is now OOM-killed and evicted before Guaranteed pods; give the sidecar limits equal to its requests to keep it Guaranteed`,
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var set []string
			for _, s := range tc.sets {
				// The readiness warning has a test of its own
				// (TestSetWarningsReadiness); these sets have no probes.
				set = append(set, slices.DeleteFunc(inject.SetWarnings(s), isReadinessWarning)...)
			}
			if diff := cmp.Diff(tc.setWarnings, set, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("SetWarnings() (-want +got):\n%s", diff)
			}
			got := inject.Inject(tc.pod, shop, tc.sets, opts)
			if len(got.Injected) == 0 {
				t.Fatal("Inject() injected nothing")
			}
			if diff := cmp.Diff(tc.podWarnings, got.Warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Inject() warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// skipped is the annotations of a pod that set was left out of for reason.
func skipped(set, reason string) map[string]string {
	reasons, err := json.Marshal(map[string]string{set: reason})
	if err != nil {
		panic(err)
	}
	return map[string]string{v1alpha1.AnnotationSkipped: set, v1alpha1.AnnotationSkippedReasons: string(reasons)}
}

// Why TestInjectSkips's sets are left out.
const (
	mountReason      = `container "scraper" mounts volume "data", which neither the pod nor the SidecarSet declares`
	portReason       = `container "y-proxy" port 15001/TCP is already declared by container "x-proxy", and the containers of a pod share one network namespace`
	privilegedReason = `the namespace enforces Pod Security "baseline:latest", which the pod meets without this SidecarSet and violates with it: privileged (container "debug" must not set securityContext.privileged=true)`
)

func TestInjectSkips(t *testing.T) {
	// mounter mounts "data", which only some pods declare, and brings a
	// volume of its own, so a skip shows that nothing of it went in.
	mounter := func() *testutil.SidecarSetBuilder {
		return testutil.SidecarSet("mounter").Selector(dbLabels).
			Containers(guaranteed("scraper", exporterImage).VolumeMount("data", "/data").Sidecar("")).
			Volumes(testutil.EmptyDirVolume("scratch")).ImagePullSecrets("regcred")
	}
	privileged := func() *testutil.SidecarSetBuilder {
		c := guaranteed("debug", proxyImage).Obj()
		c.SecurityContext = &corev1.SecurityContext{Privileged: new(true)}
		return testutil.SidecarSet("privileged").Selector(dbLabels).Containers(v1alpha1.SidecarContainer{Container: c})
	}
	port := func(name string, p int32) *v1alpha1.SidecarSet {
		c := guaranteed(name, proxyImage).Obj()
		c.Ports = []corev1.ContainerPort{{ContainerPort: p, Protocol: corev1.ProtocolTCP}}
		return testutil.SidecarSet(name).Selector(dbLabels).Containers(v1alpha1.SidecarContainer{Container: c}).Obj()
	}
	baseline := testutil.Namespace("shop", map[string]string{"pod-security.kubernetes.io/enforce": "baseline"})
	mounterInjected := testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
		Annotations(records(revision.State{"mounter": entry(mounter().Obj(), ctr("scraper", exporterImage))})).
		Containers(guaranteed("scraper", exporterImage).VolumeMount("data", "/data").Obj(), guaranteed("app", appImage).Obj()).
		Volumes(testutil.EmptyDirVolume("data"), testutil.EmptyDirVolume("scratch")).ImagePullSecrets("regcred").
		Obj()

	tests := []struct {
		name string
		pod  *corev1.Pod
		ns   *corev1.Namespace
		sets []*v1alpha1.SidecarSet
		want inject.Result
	}{{
		name: "a volume the pod lacks: the set is left out whole, the pod says so",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{mounter().Obj(), setB().Obj()},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
				Annotations(records(revision.State{"b": bEntry()})).Annotations(skipped("mounter", mountReason)).
				Containers(guaranteed("exporter", exporterImage).Obj(), guaranteed("app", appImage).Obj()).
				InitContainers(guaranteed("wait", waitImage).Obj()).
				Obj(),
			Changed:  true,
			Injected: []string{"b"},
			Skipped:  []inject.Skip{{Set: "mounter", Reason: mountReason}},
			Warnings: []string{`SidecarSet "mounter" not injected into this pod: ` + mountReason},
		},
	}, {
		name: "the pod declares the volume: injected",
		pod:  dbPod().Volumes(testutil.EmptyDirVolume("data")).Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{mounter().Obj()},
		want: inject.Result{Pod: mounterInjected, Changed: true, Injected: []string{"mounter"}},
	}, {
		name: "only skipped: the pod gets the annotation and nothing else",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{mounter().Obj()},
		want: inject.Result{
			Pod:      dbPod().Annotations(skipped("mounter", mountReason)).Obj(),
			Changed:  true,
			Skipped:  []inject.Skip{{Set: "mounter", Reason: mountReason}},
			Warnings: []string{`SidecarSet "mounter" not injected into this pod: ` + mountReason},
		},
	}, {
		name: "two sets on one port: the later by name is left out",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{port("y-proxy", 15001), port("x-proxy", 15001)},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
				Annotations(records(revision.State{"x-proxy": entry(port("x-proxy", 15001), ctr("x-proxy", proxyImage))})).
				Annotations(skipped("y-proxy", portReason)).
				Containers(port("x-proxy", 15001).Spec.Containers[0].Container, guaranteed("app", appImage).Obj()).
				Obj(),
			Changed:  true,
			Injected: []string{"x-proxy"},
			Skipped:  []inject.Skip{{Set: "y-proxy", Reason: portReason}},
			Warnings: []string{`SidecarSet "y-proxy" not injected into this pod: ` + portReason},
		},
	}, {
		name: "two sets left out: both named, each with its reason",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{port("y-proxy", 15001), mounter().Obj(), port("x-proxy", 15001)},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
				Annotations(records(revision.State{"x-proxy": entry(port("x-proxy", 15001), ctr("x-proxy", proxyImage))})).
				Annotations(map[string]string{
					v1alpha1.AnnotationSkipped: "mounter,y-proxy",
					v1alpha1.AnnotationSkippedReasons: `{"mounter":"container \"scraper\" mounts volume \"data\", which neither the pod nor the SidecarSet declares",` +
						`"y-proxy":"container \"y-proxy\" port 15001/TCP is already declared by container \"x-proxy\", and the containers of a pod share one network namespace"}`,
				}).
				Containers(port("x-proxy", 15001).Spec.Containers[0].Container, guaranteed("app", appImage).Obj()).
				Obj(),
			Changed:  true,
			Injected: []string{"x-proxy"},
			Skipped:  []inject.Skip{{Set: "mounter", Reason: mountReason}, {Set: "y-proxy", Reason: portReason}},
			Warnings: []string{`SidecarSet "mounter" not injected into this pod: ` + mountReason, `SidecarSet "y-proxy" not injected into this pod: ` + portReason},
		},
	}, {
		name: "a privileged sidecar in a baseline namespace",
		pod:  dbPod().Obj(),
		ns:   baseline,
		sets: []*v1alpha1.SidecarSet{privileged().Obj()},
		want: inject.Result{
			Pod:      dbPod().Annotations(skipped("privileged", privilegedReason)).Obj(),
			Changed:  true,
			Skipped:  []inject.Skip{{Set: "privileged", Reason: privilegedReason}},
			Warnings: []string{`SidecarSet "privileged" not injected into this pod: ` + privilegedReason},
		},
	}, {
		name: "a privileged sidecar in a namespace without a level",
		pod:  dbPod().Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{privileged().Obj()},
		want: inject.Result{
			Pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
				Annotations(records(revision.State{"privileged": entry(privileged().Obj(), ctr("debug", proxyImage))})).
				Containers(privileged().Obj().Spec.Containers[0].Container, guaranteed("app", appImage).Obj()).
				Obj(),
			Changed:  true,
			Injected: []string{"privileged"},
		},
	}, {
		name: "a skipped annotation copied from another pod goes",
		pod:  dbPod().Annotations(skipped("mounter", mountReason)).Volumes(testutil.EmptyDirVolume("data")).Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{mounter().Obj()},
		want: inject.Result{Pod: mounterInjected, Changed: true, Injected: []string{"mounter"}},
	}, {
		name: "reasons copied without the names go too",
		pod:  dbPod().Annotations(map[string]string{v1alpha1.AnnotationSkippedReasons: `{"gone":"a reason of another pod"}`}).Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setA().Selector(map[string]string{"app": "web"}).Obj()},
		want: inject.Result{Pod: dbPod().Annotations(map[string]string{}).Obj(), Changed: true},
	}, {
		name: "a skipped annotation alone goes too",
		pod:  dbPod().Annotations(skipped("gone", "a reason of another pod")).Obj(),
		ns:   shop,
		sets: []*v1alpha1.SidecarSet{setA().Selector(map[string]string{"app": "web"}).Obj()},
		want: inject.Result{Pod: dbPod().Annotations(map[string]string{}).Obj(), Changed: true},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := inject.Inject(tc.pod, tc.ns, tc.sets, opts)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(inject.Result{}, "Events")); diff != "" {
				t.Errorf("Inject() (-want +got):\n%s", diff)
			}
			// The webhook is reinvoked on its own output.
			again := inject.Inject(got.Pod, tc.ns, tc.sets, opts)
			if again.Changed {
				t.Errorf("Inject() on its own output changed the pod: injected %v, skipped %v", again.Injected, again.Skipped)
			}
		})
	}
}

func TestSkipReason(t *testing.T) {
	reasons := `{"a":"volume x is missing","b":"port 80 clashes","empty":""}`
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		set         string
		want        string
		ok          bool
	}{
		{"named, with a reason", map[string]string{v1alpha1.AnnotationSkipped: "a,b", v1alpha1.AnnotationSkippedReasons: reasons}, "b", "port 80 clashes", true},
		{"named, without a reason of its own", map[string]string{v1alpha1.AnnotationSkipped: "a,c", v1alpha1.AnnotationSkippedReasons: reasons}, "c", "", false},
		{"named, an empty reason", map[string]string{v1alpha1.AnnotationSkipped: "empty", v1alpha1.AnnotationSkippedReasons: reasons}, "empty", "", false},
		{"named, no reasons at all", map[string]string{v1alpha1.AnnotationSkipped: "a"}, "a", "", false},
		{"named, reasons not JSON", map[string]string{v1alpha1.AnnotationSkipped: "a", v1alpha1.AnnotationSkippedReasons: "volume x is missing"}, "a", "", false},
		{"a reason for a set not named", map[string]string{v1alpha1.AnnotationSkipped: "b", v1alpha1.AnnotationSkippedReasons: reasons}, "a", "", false},
		{"a name that only starts like the set's", map[string]string{v1alpha1.AnnotationSkipped: "ab", v1alpha1.AnnotationSkippedReasons: reasons}, "a", "", false},
		{"no annotations", nil, "a", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := inject.SkipReason(tc.annotations, tc.set)
			if got != tc.want || ok != tc.ok {
				t.Errorf("SkipReason(%v, %q) = %q, %v; want %q, %v", tc.annotations, tc.set, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestInjectStaleRecords(t *testing.T) {
	// A template copied from a running pod: the records of a and b, but
	// the pod's own containers only.
	copied := records(revision.State{"a": aEntry(), "b": bEntry()})
	aInjected := inject.Inject(dbPod().Obj(), shop, []*v1alpha1.SidecarSet{setA().Obj()}, opts).Pod

	tests := []struct {
		name string
		pod  *corev1.Pod
		sets []*v1alpha1.SidecarSet
		want inject.Result
	}{{
		name: "records whose containers are missing are dropped, the set injected afresh",
		pod:  dbPod().Annotations(copied).Labels(managed).Obj(),
		sets: []*v1alpha1.SidecarSet{setA().Obj()},
		want: inject.Result{
			Pod:      aInjected,
			Changed:  true,
			Injected: []string{"a"},
			Warnings: []string{
				`ignoring SidecarSet "a"'s record in the pod's annotation sidecarset.dev/state: a container it names is not in the pod (was the pod copied from a running one?); the set is injected afresh if it matches`,
				`ignoring SidecarSet "b"'s record in the pod's annotation sidecarset.dev/state: a container it names is not in the pod (was the pod copied from a running one?); the set is injected afresh if it matches`,
			},
		},
	}, {
		name: "nothing matches: the stale records and the managed label go",
		pod:  dbPod().Annotations(copied).Labels(managed).Annotations(map[string]string{"team": "x"}).Obj(),
		sets: []*v1alpha1.SidecarSet{setA().Selector(map[string]string{"app": "web"}).Obj()},
		want: inject.Result{
			Pod:     dbPod().Annotations(map[string]string{"team": "x"}).Labels(map[string]string{}).Obj(),
			Changed: true,
			Warnings: []string{
				`ignoring SidecarSet "a"'s record in the pod's annotation sidecarset.dev/state: a container it names is not in the pod (was the pod copied from a running one?); the set is injected afresh if it matches`,
				`ignoring SidecarSet "b"'s record in the pod's annotation sidecarset.dev/state: a container it names is not in the pod (was the pod copied from a running one?); the set is injected afresh if it matches`,
			},
		},
	}, {
		name: "a recorded init container found among the regular ones is stale",
		pod: func() *corev1.Pod {
			p := aInjected.DeepCopy()
			p.Spec.Containers = append(p.Spec.Containers, p.Spec.InitContainers[0])
			p.Spec.InitContainers = nil
			return p
		}(),
		sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("a").Selector(map[string]string{"app": "web"}).Obj()},
		want: inject.Result{
			Pod: func() *corev1.Pod {
				p := aInjected.DeepCopy()
				p.Spec.Containers = append(p.Spec.Containers, p.Spec.InitContainers[0])
				p.Spec.InitContainers = nil
				delete(p.Annotations, v1alpha1.AnnotationState)
				delete(p.Annotations, v1alpha1.AnnotationInjected)
				delete(p.Labels, v1alpha1.LabelManaged)
				return p
			}(),
			Changed:  true,
			Warnings: []string{`ignoring SidecarSet "a"'s record in the pod's annotation sidecarset.dev/state: a container it names is not in the pod (was the pod copied from a running one?); the set is injected afresh if it matches`},
		},
	}, {
		name: "records whose containers are there stay: reinvocation",
		pod:  aInjected,
		sets: []*v1alpha1.SidecarSet{setA().Obj()},
		want: inject.Result{Pod: aInjected},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := inject.Inject(tc.pod, shop, tc.sets, opts)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(inject.Result{}, "Events")); diff != "" {
				t.Errorf("Inject() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInjectEvents(t *testing.T) {
	tagged := testutil.SidecarSet("tagged").Selector(dbLabels).Container("agent", "agent:2").Obj()
	clash := testutil.SidecarSet("clash").Selector(dbLabels).Containers(guaranteed("app", appImage).Sidecar("")).Obj()
	mounter := testutil.SidecarSet("mounter").Selector(dbLabels).
		Containers(guaranteed("exporter", exporterImage).VolumeMount("data", "/data").Sidecar("")).Obj()
	got := inject.Inject(dbPod().Obj(), shop, []*v1alpha1.SidecarSet{tagged, clash, mounter, testutil.SidecarSet("").Obj()}, opts)
	qos := `injection changes the pod's QoS class from Guaranteed to Burstable (SidecarSet "tagged" container "agent"): under node pressure the pod is now OOM-killed and evicted before Guaranteed pods; give the sidecar limits equal to its requests to keep it Guaranteed`
	want := []inject.Event{
		{Set: "clash", Reason: inject.ReasonNotInjected, Message: `SidecarSet "clash" not injected: the pod already has a container named "app", which it keeps`},
		{Set: "mounter", Reason: inject.ReasonInjectionSkipped, Message: `SidecarSet "mounter" not injected into this pod: container "exporter" mounts volume "data", which neither the pod nor the SidecarSet declares`},
		{Set: "tagged", Reason: inject.ReasonInjectionWarning, Message: qos},
	}
	if diff := cmp.Diff(want, got.Events); diff != "" {
		t.Errorf("Inject() events (-want +got):\n%s", diff)
	}
	// Every warning about a set is an event; the one about no set is not.
	if n := len(got.Warnings); n != len(want)+1 {
		t.Errorf("%d warnings, want %d: %q", n, len(want)+1, got.Warnings)
	}
}

// TestSetWarningsPodSecurity: a sidecar or a volume that Pod Security
// baseline forbids is warned about, with the path and what the checks
// say; what baseline allows is not, even where restricted would not.
func TestSetWarningsPodSecurity(t *testing.T) {
	set := &v1alpha1.SidecarSet{Spec: v1alpha1.SidecarSetSpec{
		Containers: []v1alpha1.SidecarContainer{
			{Container: corev1.Container{Name: "exporter"}},
			{Container: corev1.Container{Name: "netdebug", SecurityContext: &corev1.SecurityContext{
				Privileged: ptr.To(true), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}},
		},
		InitContainers: []v1alpha1.SidecarContainer{
			{Container: corev1.Container{Name: "mesh-init", Ports: []corev1.ContainerPort{{ContainerPort: 15001, HostPort: 15001}}}},
		},
		Volumes: []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}},
	}}
	var got []string
	for _, w := range inject.SetWarnings(set) {
		if strings.Contains(w, "Pod Security") {
			got = append(got, w)
		}
	}
	const note = `: in namespaces that enforce baseline or restricted, where the apiserver would refuse such pods, the webhook leaves this SidecarSet out of them (skippedPods)`
	want := []string{
		`spec.containers[1]: Pod Security "baseline:latest" forbids container "netdebug" (non-default capabilities (container "netdebug" must not include "NET_ADMIN" in securityContext.capabilities.add), privileged (container "netdebug" must not set securityContext.privileged=true))` + note,
		`spec.initContainers[0]: Pod Security "baseline:latest" forbids init container "mesh-init" (hostPort (container "mesh-init" uses hostPort 15001))` + note,
		`spec.volumes: Pod Security "baseline:latest" forbids the volumes (hostPath volumes (volume "logs"))` + note,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pod Security warnings (-want +got):\n%s", diff)
	}
}
