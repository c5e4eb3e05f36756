package inject_test

import (
	"encoding/json"
	"path"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// FuzzInject checks, for any pod, namespace and sets, that Inject does not
// panic, leaves its inputs alone, reports Changed exactly when the pod
// changed, changes no more than the records when it injects nothing, writes
// records that decode, never gives a container name twice, never gives a
// sidecar with a resourcesPolicy a request above its limit, and, run again
// on its own output, never injects a set twice.
func FuzzInject(f *testing.F) {
	seed := func(pod *corev1.Pod, ns *corev1.Namespace, sets []*v1alpha1.SidecarSet, state string) {
		f.Add(mustJSON(f, pod), mustJSON(f, sets), mustJSON(f, ns), state)
	}
	ns, pod, sets := benchCluster(3)
	seed(pod, ns, sets, "")
	seed(dbPod().InitContainers(guaranteed("setup", setupImage).Obj()).Obj(), shop, []*v1alpha1.SidecarSet{setA().Obj(), setB().Obj()}, "")
	seed(dbPod().Container("log", "log:1").Obj(), nil, []*v1alpha1.SidecarSet{setA().Obj(), setB().NamespaceSelector(map[string]string{"team": "data"}).Obj()}, "")
	seed(dbPod().RestartPolicy(corev1.RestartPolicyNever).Volumes(testutil.EmptyDirVolume("shared")).Obj(), shop, []*v1alpha1.SidecarSet{
		testutil.SidecarSet("v1").Selector(dbLabels).Volumes(testutil.HostPathVolume("shared", "/a"), testutil.HostPathVolume("conf", "/a")).Container("x", "x:1").Obj(),
		testutil.SidecarSet("v2").Selector(dbLabels).Volumes(testutil.HostPathVolume("conf", "/b")).ImagePullSecrets("s").Container("x", "x:2").Obj(),
	}, "")
	seed(dbPod().Obj(), shop, []*v1alpha1.SidecarSet{setA().Obj()}, `{"a":{"revision":"a-1","hash":"1","imagelessHash":"2","containers":[]}}`)
	seed(dbPod().Obj(), shop, []*v1alpha1.SidecarSet{setA().Obj()}, `{"a":`)
	seed(testutil.Pod("", "p").Labels(dbLabels).Obj(), testutil.Namespace("kube-system", nil), []*v1alpha1.SidecarSet{
		setA().Annotations(map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "true"}).Obj(),
	}, "null")
	seed(dbPod().Obj(), shop, []*v1alpha1.SidecarSet{testutil.SidecarSet("").Selector(dbLabels).Obj()}, "")
	sharing := guaranteed("shipper", logImage).VolumeMount("own", "/var/log/").Sidecar("")
	sharing.ShareVolumePolicy = &v1alpha1.SharePolicy{Type: v1alpha1.SharePolicyEnabled}
	sharing.ShareVolumeDevicePolicy = &v1alpha1.SharePolicy{Type: v1alpha1.SharePolicyEnabled}
	sharing.TransferEnv = []v1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "A"},
		{SourceContainerNameFrom: &v1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}, EnvNames: []string{"B"}}}
	app := guaranteed("app", appImage).VolumeMount("logs", "/var/log").VolumeMount("data", "/data").Obj()
	app.VolumeMounts[1].SubPathExpr = "$(B)/$(A)"
	app.Env = []corev1.EnvVar{{Name: "A", Value: "a"}, {Name: "B", Value: "$(A)"}}
	app.VolumeDevices = []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/b"}}
	seed(testutil.Pod("shop", "p").Labels(dbLabels).Containers(app).Volumes(testutil.EmptyDirVolume("logs"), testutil.EmptyDirVolume("data"), testutil.EmptyDirVolume("own")).Obj(),
		shop, []*v1alpha1.SidecarSet{testutil.SidecarSet("share").Selector(dbLabels).Containers(sharing).Obj()}, "")
	seed(testutil.Pod("shop", "p").Labels(dbLabels).Containers(guaranteed("app", appImage).Obj(), testutil.Container("worker", appImage).Requests("1", "").Obj()).
		InitContainers(testutil.Container("own-log", logImage).RestartAlways().Limits("100m", "64Mi").Obj()).Obj(),
		shop, []*v1alpha1.SidecarSet{testutil.SidecarSet("sized").Selector(dbLabels).Containers(sized("meter", exporterImage, true)).
			InitContainers(sized("native-meter", meshImage, false)).Obj()}, "")

	f.Fuzz(func(t *testing.T, podJSON, setsJSON, nsJSON []byte, state string) {
		var pod *corev1.Pod
		var ns *corev1.Namespace
		var sets []*v1alpha1.SidecarSet
		if json.Unmarshal(podJSON, &pod) != nil || pod == nil || json.Unmarshal(nsJSON, &ns) != nil || json.Unmarshal(setsJSON, &sets) != nil {
			return
		}
		// The webhook and the CLI never pass nil sets.
		kept := sets[:0]
		for _, s := range sets {
			if s != nil {
				kept = append(kept, s)
			}
		}
		sets = kept
		if state != "" {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[v1alpha1.AnnotationState] = state
		}
		podBefore, nsBefore, setsBefore := pod.DeepCopy(), ns.DeepCopy(), deepCopies(sets)

		got := inject.Inject(pod, ns, sets, opts)

		if !equality.Semantic.DeepEqual(podBefore, pod) || !equality.Semantic.DeepEqual(nsBefore, ns) || !equality.Semantic.DeepEqual(setsBefore, sets) {
			t.Fatal("Inject() modified its input")
		}
		if got.Changed == equality.Semantic.DeepEqual(pod, got.Pod) {
			t.Fatalf("Inject() reports Changed %v, wrongly", got.Changed)
		}
		if len(got.Injected) == 0 {
			// Only the records may change: a stale one dropped, the skipped
			// annotation written or removed.
			if !equality.Semantic.DeepEqual(pod.Spec, got.Pod.Spec) {
				t.Fatal("Inject() changed the pod's spec but reports nothing injected")
			}
			return
		}
		recorded, err := revision.Decode(got.Pod.Annotations)
		if err != nil {
			t.Fatalf("Inject() wrote a state annotation that does not decode: %v", err)
		}
		for _, name := range got.Injected {
			if _, ok := recorded[name]; !ok {
				t.Fatalf("Inject() injected %q without recording it", name)
			}
		}
		if got.Pod.Annotations[v1alpha1.AnnotationInjected] != revision.InjectedNames(recorded) || got.Pod.Labels[v1alpha1.LabelManaged] != "true" {
			t.Fatal("Inject() wrote inconsistent records")
		}
		checkNamesAdded(t, pod, got.Pod)
		checkShared(t, sets, got.Pod)
		checkSized(t, sets, got.Pod)

		again := inject.Inject(got.Pod, ns, sets, opts)
		for _, name := range again.Injected {
			if _, ok := recorded[name]; ok {
				t.Fatalf("Inject() on its own output injected %q again", name)
			}
		}
		checkNamesAdded(t, got.Pod, again.Pod)
	})
}

// checkNamesAdded fails when after uses a container name more often than
// before did, other than once for a newly added name.
func checkNamesAdded(t *testing.T, before, after *corev1.Pod) {
	t.Helper()
	count := func(p *corev1.Pod) map[string]int {
		n := map[string]int{}
		for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, c := range cs {
				n[c.Name]++
			}
		}
		for _, c := range p.Spec.EphemeralContainers {
			n[c.Name]++
		}
		return n
	}
	was := count(before)
	for name, n := range count(after) {
		if n > max(was[name], 1) {
			t.Fatalf("container %q is in the pod %d times, was %d", name, n, was[name])
		}
	}
}

// checkShared fails when a sidecar that shares the app's mounts or
// devices got one at a path it already had (its own or shared before), or
// a copied variable of a name it already had.
func checkShared(t *testing.T, sets []*v1alpha1.SidecarSet, pod *corev1.Pod) {
	t.Helper()
	declared := map[string]*v1alpha1.SidecarContainer{}
	for _, s := range sets {
		for i := range s.Spec.Containers {
			declared[s.Spec.Containers[i].Name] = &s.Spec.Containers[i]
		}
		for i := range s.Spec.InitContainers {
			declared[s.Spec.InitContainers[i].Name] = &s.Spec.InitContainers[i]
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			sc := declared[c.Name]
			if sc == nil {
				continue
			}
			var paths []string
			for _, m := range c.VolumeMounts {
				paths = append(paths, path.Clean(m.MountPath))
			}
			for _, d := range c.VolumeDevices {
				paths = append(paths, path.Clean(d.DevicePath))
			}
			own := len(sc.VolumeMounts)
			for i := own; i < len(c.VolumeMounts); i++ {
				if slices.Contains(paths[:i], paths[i]) {
					t.Fatalf("container %q got a mount at %s, a path it had", c.Name, paths[i])
				}
			}
			for i := len(c.VolumeMounts) + len(sc.VolumeDevices); i < len(paths); i++ {
				if slices.Contains(paths[:i], paths[i]) {
					t.Fatalf("container %q got a device at %s, a path it had", c.Name, paths[i])
				}
			}
			copied := len(c.Env) - len(sc.Env)
			for i := range copied {
				if slices.ContainsFunc(c.Env[i+1:], func(e corev1.EnvVar) bool { return e.Name == c.Env[i].Name }) {
					t.Fatalf("container %q got variable %q copied over one it had", c.Name, c.Env[i].Name)
				}
			}
		}
	}
}

// checkSized fails when a sidecar with a resourcesPolicy got a request
// above its limit, which the apiserver refuses.
func checkSized(t *testing.T, sets []*v1alpha1.SidecarSet, pod *corev1.Pod) {
	t.Helper()
	sized := map[string]bool{}
	for _, s := range sets {
		for _, cs := range [][]v1alpha1.SidecarContainer{s.Spec.Containers, s.Spec.InitContainers} {
			for _, sc := range cs {
				sized[sc.Name] = sc.ResourcesPolicy != nil
			}
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if !sized[c.Name] {
				continue
			}
			for name, req := range c.Resources.Requests {
				if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
					t.Fatalf("container %q requests %s %s, above its limit %s", c.Name, req.String(), name, lim.String())
				}
			}
		}
	}
}

func mustJSON(f *testing.F, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
