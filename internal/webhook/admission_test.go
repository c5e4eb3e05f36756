package webhook_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/webhook"
)

// createPod creates pod through a client that collects the warnings the
// apiserver relays, and returns the pod as stored.
func createPod(t *testing.T, pod *corev1.Pod) (*corev1.Pod, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	got, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return got, w
}

// setEvents returns the events with reason about the SidecarSet named set:
// it is cluster-scoped, so they are in namespace default.
func setEvents(t *testing.T, set, reason string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == "SidecarSet" && e.InvolvedObject.Name == set {
			out = append(out, e)
		}
	}
	return out
}

func waitSetEvent(t *testing.T, set, reason string) corev1.Event {
	t.Helper()
	var got []corev1.Event
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = setEvents(t, set, reason)
		return len(got) > 0, nil
	})
	if err != nil {
		t.Fatalf("wait for a %s event on SidecarSet %s: %v", reason, set, err)
	}
	return got[0]
}

// assertSkipped checks that pod was created with its own containers only,
// marked skipped for set, with a warning saying why.
func assertSkipped(t *testing.T, pod *corev1.Pod, w *warnings, set, why string) {
	t.Helper()
	if names := containerNames(pod.Spec.Containers); len(names) != 1 {
		t.Errorf("containers = %v, want the pod's own only", names)
	}
	if pod.Annotations[v1alpha1.AnnotationSkipped] != set || pod.Annotations[v1alpha1.AnnotationInjected] != "" {
		t.Errorf("annotations %v, want %s=%s and no injection record", pod.Annotations, v1alpha1.AnnotationSkipped, set)
	}
	if !strings.Contains(w.all(), `SidecarSet "`+set+`" not injected into this pod`) || !strings.Contains(w.all(), why) {
		t.Errorf("warnings %q do not say that %s was left out because %s", w.all(), set, why)
	}
	if reason, _ := inject.SkipReason(pod.Annotations, set); !strings.Contains(reason, why) {
		t.Errorf("annotation %s = %q, want %s's reason, saying %s", v1alpha1.AnnotationSkippedReasons,
			pod.Annotations[v1alpha1.AnnotationSkippedReasons], set, why)
	}
}

func TestPodCreatedWithoutASetMountingAMissingVolume(t *testing.T) {
	labels := map[string]string{"example.com/mysql": "missing-volume"}
	set := sidecarSet("missing-volume", labels, corev1.Container{Name: "exporter", Image: "exporter:1",
		VolumeMounts: []corev1.VolumeMount{{Name: "mysql", MountPath: "/var/lib/mysql"}}})
	createSet(t, set)
	ns := namespace(t, nil)
	pod, w := createPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysql", Image: "mysql:8.4"}}},
	})
	assertSkipped(t, pod, w, set.Name, `mounts volume "mysql", which neither the pod nor the SidecarSet declares`)
	ev := waitSetEvent(t, set.Name, inject.ReasonInjectionSkipped)
	if !strings.Contains(ev.Message, "pod "+ns+"/db-0") || !strings.Contains(ev.Message, `volume "mysql"`) {
		t.Errorf("event message %q does not name the pod and the volume", ev.Message)
	}

	// A pod that declares the volume gets the set.
	withVolume, _ := createPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-1", Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "mysql", Image: "mysql:8.4"}},
			Volumes:    []corev1.Volume{{Name: "mysql", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	})
	if withVolume.Annotations[v1alpha1.AnnotationInjected] != set.Name || withVolume.Annotations[v1alpha1.AnnotationSkipped] != "" {
		t.Errorf("pod with the volume: annotations %v, want %s injected", withVolume.Annotations, set.Name)
	}
}

func TestHostNetworkPodCreatedWithoutAClashingSet(t *testing.T) {
	cases := []struct {
		name string
		port corev1.ContainerPort
		why  string
	}{
		{"the app's port", corev1.ContainerPort{ContainerPort: 3306}, `port 3306/TCP is already declared by container "mysql"`},
		{"a hostPort other than the containerPort", corev1.ContainerPort{ContainerPort: 9104, HostPort: 19104}, "hostPort must equal containerPort"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			labels := map[string]string{"example.com/mysql": "host-network-" + string(rune('a'+i))}
			set := sidecarSet("host-network-"+string(rune('a'+i)), labels, corev1.Container{Name: "exporter", Image: "exporter:1", Ports: []corev1.ContainerPort{tc.port}})
			createSet(t, set)
			ns := namespace(t, nil)
			pod, w := createPod(t, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0", Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork: true,
					Containers:  []corev1.Container{{Name: "mysql", Image: "mysql:8.4", Ports: []corev1.ContainerPort{{ContainerPort: 3306}}}},
				},
			})
			assertSkipped(t, pod, w, set.Name, tc.why)
		})
	}
}

func TestRestrictedNamespaceGetsNoPrivilegedSidecar(t *testing.T) {
	labels := map[string]string{"example.com/mysql": "restricted"}
	set := sidecarSet("privileged-debugger", labels, corev1.Container{Name: "debugger", Image: "debugger:1",
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}})
	createSet(t, set)
	ns := namespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	pod, w := createPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0", Labels: labels},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{Name: "mysql", Image: "mysql:8.4", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}}},
		},
	})
	assertSkipped(t, pod, w, set.Name, `the namespace enforces Pod Security "restricted:latest"`)
	waitSetEvent(t, set.Name, inject.ReasonInjectionSkipped)
}

func TestSidecarSetRefusedByThePodValidation(t *testing.T) {
	// Neither the CRD schema nor the SidecarSet's own validation knows that
	// a privileged container cannot refuse privilege escalation; the
	// apiserver's pod validation does, and would refuse every pod.
	set := sidecarSet("escalating", map[string]string{"example.com/mysql": "escalating"},
		corev1.Container{Name: "exporter", Image: "exporter:1"},
		corev1.Container{Name: "debugger", Image: "debugger:1", SecurityContext: &corev1.SecurityContext{
			Privileged: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)}})
	err := env.Client.Create(t.Context(), set)
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		t.Fatalf("create = %v, want Invalid", err)
	}
	var fields []string
	for _, c := range status.Status().Details.Causes {
		fields = append(fields, c.Field)
	}
	if strings.Join(fields, ",") != "spec.containers[1].securityContext" {
		t.Errorf("causes %+v, want one on spec.containers[1].securityContext", status.Status().Details.Causes)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(set), &v1alpha1.SidecarSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("refused SidecarSet exists anyway: %v", err)
	}

	// The same change on an update is refused too; a fix is accepted.
	good := sidecarSet("escalating", map[string]string{"example.com/mysql": "escalating"},
		corev1.Container{Name: "exporter", Image: "exporter:1"})
	createSet(t, good)
	err = updateSet(t, good.Name, func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)}
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.containers[0].securityContext") {
		t.Errorf("update = %v, want Invalid on spec.containers[0].securityContext", err)
	}
	if err := updateSet(t, good.Name, func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:2" }); err != nil {
		t.Errorf("update of the image: %v", err)
	}
}

// updateSet applies change to the stored SidecarSet named name, again on a
// conflict (the controller writes the set's status meanwhile), and returns
// any other error.
func updateSet(t *testing.T, name string, change func(*v1alpha1.SidecarSet)) error {
	t.Helper()
	for {
		set := &v1alpha1.SidecarSet{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, set); err != nil {
			t.Fatalf("get SidecarSet %s: %v", name, err)
		}
		change(set)
		if err := env.Client.Update(t.Context(), set); !apierrors.IsConflict(err) {
			return err
		}
	}
}

// laggingCache is an informer cache that has not seen any namespace yet.
type laggingCache struct{ client.Reader }

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Namespace); ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, key.Name)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

func TestPodInANamespaceTheCacheHasNotSeen(t *testing.T) {
	labels := map[string]string{"example.com/mysql": "fresh-namespace"}
	// Only for pods outside production: a namespace taken for unlabelled
	// would match.
	set := sidecarSet("fresh-namespace", labels, corev1.Container{Name: "exporter", Image: "exporter@sha256:0123"})
	set.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "example.com/env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"production"}}}}
	createSet(t, set)
	production := namespace(t, map[string]string{"example.com/env": "production"})
	staging := namespace(t, map[string]string{"example.com/env": "staging"})

	cached, _ := countingMutator(t)
	mutator := &webhook.PodMutator{Reader: laggingCache{cached.Reader}, APIReader: env.Client, Options: cached.Options}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysql", Image: "mysql:8.4"}}},
	}
	if resp := mutator.Handle(t.Context(), podRequest(t, production, pod)); !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("pod in production: allowed %v, patches %v; want it left alone", resp.Allowed, resp.Patches)
	}
	if resp := mutator.Handle(t.Context(), podRequest(t, staging, pod)); !resp.Allowed || len(resp.Patches) == 0 {
		t.Errorf("pod in staging: allowed %v, %d patches; want the exporter injected", resp.Allowed, len(resp.Patches))
	}
	// The patch names no namespace: the request's is the pod's.
	resp := mutator.Handle(t.Context(), podRequest(t, staging, pod))
	for _, p := range resp.Patches {
		if strings.HasPrefix(p.Path, "/metadata/namespace") {
			t.Errorf("patch %+v sets the namespace", p)
		}
	}
}

func TestCopiedTemplateInjected(t *testing.T) {
	labels := map[string]string{"example.com/mysql": "copied-template"}
	set := sidecarSet("copied-template", labels, corev1.Container{Name: "exporter", Image: "exporter:1"})
	createSet(t, set)
	ns := namespace(t, nil)
	running, _ := createPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysql", Image: "mysql:8.4"}}},
	})
	// A new pod with the running one's metadata and the app's own spec.
	copied, w := createPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-1", Labels: running.Labels, Annotations: running.Annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysql", Image: "mysql:8.4"}}},
	})
	if names := containerNames(copied.Spec.Containers); strings.Join(names, ",") != "exporter,mysql" {
		t.Errorf("containers = %v, want the exporter injected", names)
	}
	state, err := revision.Decode(copied.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := state[set.Name].Container("exporter"); !ok {
		t.Errorf("state %+v, want the exporter recorded", state)
	}
	if !strings.Contains(w.all(), "copied from a running one") {
		t.Errorf("warnings %q do not mention the stale record", w.all())
	}
}
