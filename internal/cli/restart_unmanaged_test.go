package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// template is a pod template with the fixture's labels plus extra and the
// app container alone; Create fits it to the nodes.
func (f *testFixture) template(extra map[string]string) corev1.PodTemplateSpec {
	pod := f.NewPod("")
	for k, v := range extra {
		pod.Labels[k] = v
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}
}

func TestRestartUnmanaged(t *testing.T) {
	f := newFixture(t)
	// Workloads and a bare pod made before the SidecarSet: no sidecars.
	f.Create(
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}},
			Template: f.template(map[string]string{"role": "web"}),
		}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "db"}},
			Template: f.template(map[string]string{"role": "db"}),
		}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Labels: f.Labels}, Spec: f.template(nil).Spec},
	)
	f.WaitReady(4)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.WaitStatus("4 unmanaged pods", func(st v1alpha1.SidecarSetStatus) bool { return st.UnmanagedPods == 4 })

	dry := ok(t, "restart-unmanaged", f.Set, "--dry-run")
	mustContain(t, dry.out,
		f.Set+": 4 unmanaged pods:",
		"Deployment "+f.NS+"/web (web-",
		"StatefulSet "+f.NS+"/db (db-0): to restart",
		"pod "+f.NS+"/bare (bare): not touched: no owner",
		"dry run: would restart 2 workloads, one at a time")
	if restarted(t, f, "web") || restarted(t, f, "db") {
		t.Fatal("--dry-run restarted a workload")
	}

	r := ok(t, "restart-unmanaged", f.Set, "--timeout", "60s")
	mustContain(t, r.out,
		"Deployment "+f.NS+"/web: restarting ("+cli.AnnotationRestartedAt+"=",
		"Deployment "+f.NS+"/web: all 2 pods carry SidecarSet "+f.Set,
		"StatefulSet "+f.NS+"/db: all 1 pods carry SidecarSet "+f.Set,
		f.Set+": restarted 2 workloads")
	// One at a time: the StatefulSet starts only after the Deployment is
	// rolled out.
	if strings.Index(r.out, "StatefulSet "+f.NS+"/db: restarting") < strings.Index(r.out, "Deployment "+f.NS+"/web: all 2 pods carry") {
		t.Errorf("the StatefulSet was restarted before the Deployment finished:\n%s", r.out)
	}
	if !restarted(t, f, "web") || !restarted(t, f, "db") {
		t.Error("cluster: a workload's pod template lacks the restart annotation")
	}
	for _, p := range f.Pods() {
		if p.DeletionTimestamp != nil {
			continue
		}
		state, _ := revision.Decode(p.Annotations)
		_, managed := state[f.Set]
		if managed == (p.Name == "bare") {
			t.Errorf("pod %s: carries the record %v; only the bare pod should lack it", p.Name, managed)
		}
	}
	f.WaitStatus("3 matched pods", func(st v1alpha1.SidecarSetStatus) bool { return st.MatchedPods == 3 })
}

func TestRestartUnmanagedHonoursBudgets(t *testing.T) {
	f := newFixture(t)
	f.Create(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](2),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}},
		Template: f.template(map[string]string{"role": "web"}),
	}})
	f.WaitReady(2)
	// No disruption allowed.
	f.Create(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}},
	}})
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.WaitStatus("2 unmanaged pods", func(st v1alpha1.SidecarSetStatus) bool { return st.UnmanagedPods == 2 })

	r := kubectl(t, false, "restart-unmanaged", f.Set, "--timeout", "2s")
	want := "Deployment " + f.NS + "/web: refusing to restart: PodDisruptionBudget " + f.NS + "/web allows no disruption (status.disruptionsAllowed 0) for --timeout 2s; not restarted: Deployment " + f.NS + "/web"
	if r.err == nil || !strings.Contains(r.err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", r.err, want)
	}
	mustContain(t, r.out, "Deployment "+f.NS+"/web: waiting: PodDisruptionBudget "+f.NS+"/web allows no disruption")
	if restarted(t, f, "web") {
		t.Error("cluster: the Deployment was restarted despite its PodDisruptionBudget")
	}

	other := newFixture(t)
	other.Create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: other.template(nil).Spec})
	paused := other.SidecarSet("exporter:v1", 0)
	paused.Spec.InjectionStrategy.Paused = true
	other.CreateSet(paused)
	r = kubectl(t, false, "restart-unmanaged", other.Set)
	if r.err == nil || !strings.Contains(r.err.Error(), "spec.injectionStrategy.paused is true: restarted pods would not get the sidecars either") {
		t.Errorf("restart with injection paused: %v", r.err)
	}
}

// restarted reports whether the workload's pod template carries the
// restart annotation.
func restarted(t *testing.T, f *testFixture, name string) bool {
	t.Helper()
	key := client.ObjectKey{Namespace: f.NS, Name: name}
	var tmpl corev1.PodTemplateSpec
	d := &appsv1.Deployment{}
	if err := env.Client.Get(t.Context(), key, d); err == nil {
		tmpl = d.Spec.Template
	} else {
		s := &appsv1.StatefulSet{}
		if err := env.Client.Get(t.Context(), key, s); err != nil {
			t.Fatalf("get workload %s: %v", name, err)
		}
		tmpl = s.Spec.Template
	}
	return tmpl.Annotations[cli.AnnotationRestartedAt] != ""
}

// TestRestartUnmanagedMembership: restart-unmanaged, `pods` and the status
// agree on which pods are the set's (rollout.MemberOf). A finished Job pod
// counts nowhere; a pod the webhook skipped the set for is not unmanaged;
// a pod whose own record is damaged is unmanaged, and one whose other set's
// record is damaged is still the set's.
func TestRestartUnmanagedMembership(t *testing.T) {
	f := newFixture(t)
	spec := f.template(nil).Spec
	rec := revision.SetState{Revision: f.Set + "-1", Hash: "h", ImagelessHash: "i",
		Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:v1"}}}
	managed := map[string]string{v1alpha1.LabelManaged: "true"}
	for k, v := range f.Labels {
		managed[k] = v
	}
	withExporter := spec.DeepCopy()
	withExporter.Containers = append(withExporter.Containers, corev1.Container{Name: "exporter", Image: "exporter:v1"})
	done := spec.DeepCopy()
	done.RestartPolicy = corev1.RestartPolicyNever
	done.Containers[0].Image = "migrate-completes:v1"
	f.Create(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "done", Labels: f.Labels}, Spec: *done},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "skipped", Labels: f.Labels,
			Annotations: map[string]string{v1alpha1.AnnotationSkipped: f.Set}}, Spec: spec},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "corrupt", Labels: managed,
			Annotations: map[string]string{v1alpha1.AnnotationInjected: f.Set,
				v1alpha1.AnnotationState: `{"` + f.Set + `": {"revision": "broken"}}`}}, Spec: *withExporter},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other-corrupt", Labels: managed,
			Annotations: map[string]string{v1alpha1.AnnotationInjected: f.Set + ",other",
				v1alpha1.AnnotationState: `{"other": 1, "` + f.Set + `": ` + string(mustMarshal(t, rec)) + `}`}}, Spec: *withExporter},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Labels: f.Labels}, Spec: spec},
	)
	f.WaitPods("the Job pod finished, the others ready", func(pods []corev1.Pod) bool {
		ready := 0
		for _, p := range pods {
			if p.Name == "done" && p.Status.Phase != corev1.PodSucceeded {
				return false
			}
			if fixture.PodReady(&p) {
				ready++
			}
		}
		return ready == 4
	})
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.WaitStatus("1 matched, 2 unmanaged, 1 skipped", func(st v1alpha1.SidecarSetStatus) bool {
		return st.MatchedPods == 1 && st.UnmanagedPods == 2 && st.SkippedPods == 1
	})

	dry := ok(t, "restart-unmanaged", f.Set, "--dry-run")
	mustContain(t, dry.out,
		f.Set+": 2 unmanaged pods:",
		"pod "+f.NS+"/corrupt (corrupt): not touched: no owner",
		"pod "+f.NS+"/plain (plain): not touched: no owner")
	for _, name := range []string{"done", "skipped", "other-corrupt"} {
		if strings.Contains(dry.out, "("+name+")") {
			t.Errorf("restart-unmanaged lists pod %s:\n%s", name, dry.out)
		}
	}
	pods := ok(t, "pods", f.Set)
	if n := len(lines(pods.out)); n != 2 {
		t.Errorf("pods: %d lines, want a header and other-corrupt:\n%s", n, pods.out)
	}
	row(t, pods.out, f.NS+"/other-corrupt")
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
