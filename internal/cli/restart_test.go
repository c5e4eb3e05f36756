package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
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
	// No surge: the rollout takes a pod down at once.
	web := f.deployment("web", 2, nil)
	web.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(0))}
	f.Create(web)
	f.WaitReady(2)
	// No disruption allowed, ever.
	f.Create(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}},
	}})
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.WaitStatus("2 unmanaged pods", func(st v1alpha1.SidecarSetStatus) bool { return st.UnmanagedPods == 2 })
	waitBudget(t, f, "web", 0)

	r := kubectl(t, false, "restart-unmanaged", f.Set, "--timeout", "2s")
	if !errors.Is(r.err, cli.ErrRefused) {
		t.Fatalf("error %v, want ErrRefused", r.err)
	}
	mustContain(t, r.out, "Deployment "+f.NS+"/web (web-", "refused: its rollout takes up to 1 pod down at once (maxUnavailable 25% of 2 replicas), more than PodDisruptionBudget "+f.NS+"/web ever allows (0: 2 expected pods, 2 desired healthy)")
	if restarted(t, f, "web") {
		t.Error("cluster: the Deployment was restarted despite its PodDisruptionBudget")
	}

	other := newFixture(t)
	other.Create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: other.template(nil).Spec})
	paused := other.SidecarSet("exporter:v1", 0)
	paused.Spec.InjectionStrategy.Paused = true
	other.CreateSet(paused)
	r = kubectl(t, false, "restart-unmanaged", other.Set)
	if r.err == nil || !strings.Contains(r.err.Error(), "spec.injectionStrategy.paused is true: restarted pods would not get the sidecars either") || cli.ExitCode(r.err) != 3 {
		t.Errorf("restart with injection paused: %v (exit %d, want 3)", r.err, cli.ExitCode(r.err))
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
	// The skipped pod is listed below the set's pods; made by hand, it
	// carries no reason.
	pods := ok(t, "pods", f.Set)
	if n := len(lines(pods.out)); n != 4 {
		t.Errorf("pods: %d lines, want a header and other-corrupt, then a header and skipped:\n%s", n, pods.out)
	}
	row(t, pods.out, f.NS+"/other-corrupt")
	mustContain(t, strings.Join(row(t, pods.out, f.NS+"/skipped"), " "), "not recorded on the pod")
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deployment is a Deployment of the fixture's pods plus role: name, with
// replicas and the template's app container changed by change.
func (f *testFixture) deployment(name string, replicas int32, change func(*corev1.PodTemplateSpec)) *appsv1.Deployment {
	tmpl := f.template(map[string]string{"role": name})
	if change != nil {
		change(&tmpl)
	}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": name}},
		Template: tmpl,
	}}
}

// TestRestartUnmanagedChecksFirst: --dry-run lists exactly what a real run
// restarts. A workload the webhook would not inject (here: its template
// already has a container named like the sidecar) is refused with the
// webhook's reason rather than restarted over and over; an OnDelete
// StatefulSet, a StatefulSet whose partition keeps its pods, and a paused
// Deployment are not touched.
func TestRestartUnmanagedChecksFirst(t *testing.T) {
	f := newFixture(t)
	clash := f.deployment("clash", 1, func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Spec.Containers = append(tmpl.Spec.Containers, corev1.Container{Name: "exporter", Image: "exporter:v0"})
	})
	paused := f.deployment("paused", 1, nil)
	f.Create(f.deployment("web", 1, nil), clash, paused,
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "ondelete"}, Spec: appsv1.StatefulSetSpec{
			Replicas:       ptr.To[int32](1),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"role": "ondelete"}},
			Template:       f.template(map[string]string{"role": "ondelete"}),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
		}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "partitioned"}, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "partitioned"}},
			Template: f.template(map[string]string{"role": "partitioned"}),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}},
		}})
	f.WaitReady(5)
	if err := env.Client.Patch(t.Context(), paused, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`))); err != nil {
		t.Fatal(err)
	}
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.WaitStatus("5 unmanaged pods", func(st v1alpha1.SidecarSetStatus) bool { return st.UnmanagedPods == 5 })

	dry := ok(t, "restart-unmanaged", f.Set, "--dry-run")
	mustContain(t, dry.out,
		"Deployment "+f.NS+"/clash (clash-",
		"refused: the webhook skips SidecarSet "+f.Set+" for a dry-run pod of its template:",
		"Deployment "+f.NS+"/paused (paused-",
		"not touched: the Deployment is paused",
		"StatefulSet "+f.NS+"/ondelete (ondelete-0): not touched: updateStrategy OnDelete",
		"StatefulSet "+f.NS+"/partitioned (partitioned-0): not touched: rollingUpdate.partition 1",
		"dry run: would restart 1 workload, one at a time: Deployment "+f.NS+"/web\n")

	r := kubectl(t, false, "restart-unmanaged", f.Set, "--timeout", "60s")
	if !errors.Is(r.err, cli.ErrRefused) || cli.ExitCode(r.err) != 1 {
		t.Fatalf("error %v (exit %d), want ErrRefused, exit 1", r.err, cli.ExitCode(r.err))
	}
	mustContain(t, r.err.Error(), "refused to restart 1 workload: Deployment "+f.NS+"/clash")
	mustContain(t, r.out, "Deployment "+f.NS+"/web: all 1 pods carry SidecarSet "+f.Set, f.Set+": restarted 1 workload\n")
	for name, want := range map[string]bool{"web": true, "clash": false, "paused": false, "ondelete": false, "partitioned": false} {
		if got := restarted(t, f, name); got != want {
			t.Errorf("cluster: workload %s restarted %v, want %v", name, got, want)
		}
	}
}

// TestRestartUnmanagedBudgetPace: a Deployment whose own rolling update
// takes 2 pods down at once under a budget allowing 1 is refused with the
// numbers, not restarted.
func TestRestartUnmanagedBudgetPace(t *testing.T) {
	f := newFixture(t)
	web := f.deployment("web", 4, nil)
	half := intstr.FromString("50%")
	web.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: &half, MaxSurge: ptr.To(intstr.FromInt32(0))}
	f.Create(web, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}},
	}})
	f.WaitReady(4)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.WaitStatus("4 unmanaged pods", func(st v1alpha1.SidecarSetStatus) bool { return st.UnmanagedPods == 4 })
	waitBudget(t, f, "web", 1)

	want := "refused: its rollout takes up to 2 pods down at once (maxUnavailable 50% of 4 replicas), more than PodDisruptionBudget " +
		f.NS + "/web ever allows (1: 4 expected pods, 3 desired healthy); lower the workload's maxUnavailable to 1, or loosen the budget"
	dry := ok(t, "restart-unmanaged", f.Set, "--dry-run")
	mustContain(t, dry.out, want, "dry run: would restart 0 workloads")
	r := kubectl(t, false, "restart-unmanaged", f.Set, "--timeout", "10s")
	if !errors.Is(r.err, cli.ErrRefused) {
		t.Fatalf("error %v, want ErrRefused", r.err)
	}
	mustContain(t, r.out, want)
	if restarted(t, f, "web") {
		t.Error("cluster: the Deployment was restarted at a pace its budget does not allow")
	}
}

// waitBudget waits until the disruption controller says budget name allows
// allowed disruptions.
func waitBudget(t *testing.T, f *testFixture, name string, allowed int32) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.NS, Name: name}, pdb); err != nil {
			return false, err
		}
		return pdb.Status.ObservedGeneration >= pdb.Generation && pdb.Status.DisruptionsAllowed == allowed, nil
	})
	if err != nil {
		t.Fatalf("PodDisruptionBudget %s allowing %d: %v", name, allowed, err)
	}
}

// TestRestartUnmanagedTimeoutAndDeletion: a workload deleted while it
// rolls does not stop the run; one whose rollout does not finish within
// --timeout is reported as restarted but unfinished (exit 4), not as "not
// restarted".
func TestRestartUnmanagedTimeoutAndDeletion(t *testing.T) {
	f := newFixture(t)
	// a's pods never become ready, so its rollout never ends.
	slow := f.deployment("a", 1, func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Spec.Containers[0].Image = "mysql-never-ready:8.4"
		tmpl.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/version"}}}, PeriodSeconds: 1}
	})
	f.Create(slow, f.deployment("b", 1, nil))
	f.WaitPods("2 running pods", func(pods []corev1.Pod) bool {
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 2
	})
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.WaitStatus("2 unmanaged pods", func(st v1alpha1.SidecarSetStatus) bool { return st.UnmanagedPods == 2 })

	// Unfinished: a never rolls out within 2s, b is not reached.
	r := kubectl(t, false, "restart-unmanaged", f.Set, "--timeout", "2s")
	if !errors.Is(r.err, cli.ErrTimeout) || cli.ExitCode(r.err) != 4 {
		t.Fatalf("error %v (exit %d), want ErrTimeout, exit 4", r.err, cli.ExitCode(r.err))
	}
	mustContain(t, r.err.Error(), "Deployment "+f.NS+"/a: timed out: restarted ("+cli.AnnotationRestartedAt+"=",
		"but its rollout did not finish within --timeout 2s", "; not restarted: Deployment "+f.NS+"/b")
	if strings.Contains(r.err.Error(), "not restarted: Deployment "+f.NS+"/a") {
		t.Errorf("a was restarted, the error says it was not: %v", r.err)
	}

	// Deleted mid-run: the run goes on with b.
	done := make(chan result, 1)
	go func() { done <- kubectl(t, false, "restart-unmanaged", f.Set, "--timeout", "60s") }()
	before := slow.Spec.Template.Annotations[cli.AnnotationRestartedAt]
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.NS, Name: "a"}, d); err != nil {
			return false, err
		}
		return d.Spec.Template.Annotations[cli.AnnotationRestartedAt] != before && d.Generation > 2, nil
	})
	if err != nil {
		t.Fatalf("the second run did not restart a: %v", err)
	}
	if err := env.Client.Delete(t.Context(), slow); err != nil {
		t.Fatal(err)
	}
	r = <-done
	if r.err != nil {
		t.Fatalf("a workload deleted mid-run aborted the run: %v", r.err)
	}
	mustContain(t, r.out, "Deployment "+f.NS+"/a: deleted during its restart; going on with the others",
		"Deployment "+f.NS+"/b: all 1 pods carry SidecarSet "+f.Set, f.Set+": restarted 1 workload\n")
}

// TestRestartNotUpgradable: after a change other than an image, restart
// (not-upgradable by default) recreates the Deployment's pods so that they
// take the latest revision at injection, lists the bare pod and never
// deletes it, refuses while a partition holds pods back, and on a terminal
// counts the workloads in a bar.
func TestRestartNotUpgradable(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.Create(f.deployment("web", 2, nil),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Labels: f.Labels}, Spec: f.template(nil).Spec})
	f.WaitReady(3)
	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
	})
	f.WaitStatus("3 not-upgradable pods", func(st v1alpha1.SidecarSetStatus) bool { return st.NotUpgradablePods == 3 })

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = partition("1") })
	r := kubectl(t, false, "restart", f.Set, "--timeout", "30s")
	if !errors.Is(r.err, cli.ErrRefused) || cli.ExitCode(r.err) != 1 {
		t.Fatalf("under a partition: error %v (exit %d), want ErrRefused, exit 1", r.err, cli.ExitCode(r.err))
	}
	mustContain(t, r.out, "Deployment "+f.NS+"/web (web-", "refused: pod web-", "carries SidecarSet "+f.Set+", whose updateStrategy.partition 1 keeps pods on older revisions")
	if restarted(t, f, "web") {
		t.Fatal("restarted a workload whose pods the partition holds back")
	}
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = nil })

	dry := ok(t, "restart", f.Set, "--dry-run")
	mustContain(t, dry.out,
		f.Set+": 3 not-upgradable pods:",
		"Deployment "+f.NS+"/web (web-",
		"pod "+f.NS+"/bare (bare): not touched: no owner",
		"dry run: would restart 1 workload, one at a time: Deployment "+f.NS+"/web\n")
	if restarted(t, f, "web") {
		t.Fatal("--dry-run restarted a workload")
	}

	r = kubectl(t, true, "restart", f.Set, "--timeout", "60s")
	if r.err != nil {
		t.Fatalf("restart: %v\n%s", r.err, r.out)
	}
	mustContain(t, r.out,
		"Deployment "+f.NS+"/web: restarting ("+cli.AnnotationRestartedAt+"=",
		"Deployment "+f.NS+"/web: all 2 pods carry SidecarSet "+f.Set+", upgradable in place to revision ",
		"1/1 workloads",
		f.Set+": restarted 1 workload\n")
	st := f.WaitStatus("1 not-upgradable pod", func(st v1alpha1.SidecarSetStatus) bool {
		return st.NotUpgradablePods == 1 && st.MatchedPods == 3
	})
	if st.UpdatedPods != 2 {
		t.Errorf("status: %d updated pods, want the 2 recreated ones", st.UpdatedPods)
	}
	bare := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: f.NS, Name: "bare"}, bare); err != nil || bare.DeletionTimestamp != nil {
		t.Errorf("the bare pod was deleted: %v", err)
	}
}

// TestRestartSkipped: --skipped finds the pods the webhook skipped the set
// for; while the cause stands (the app declares the sidecar's port), the
// workload is refused with the webhook's reason, not restarted.
func TestRestartSkipped(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9104}}
	f.CreateSet(set)
	f.Create(f.deployment("clash", 1, func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Spec.Containers[0].Ports = append(tmpl.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 9104})
	}), f.deployment("web", 1, nil))
	f.WaitReady(2)
	f.WaitStatus("1 skipped pod", func(st v1alpha1.SidecarSetStatus) bool { return st.SkippedPods == 1 })

	none := ok(t, "restart", f.Set, "--unmanaged")
	mustContain(t, none.out, f.Set+": no unmanaged pods\n")

	r := kubectl(t, false, "restart", f.Set, "--skipped", "--not-upgradable", "--timeout", "30s")
	if !errors.Is(r.err, cli.ErrRefused) || cli.ExitCode(r.err) != 1 {
		t.Fatalf("error %v (exit %d), want ErrRefused, exit 1", r.err, cli.ExitCode(r.err))
	}
	mustContain(t, r.out,
		f.Set+": 0 not-upgradable pods, 1 skipped pod:",
		"Deployment "+f.NS+"/clash (clash-",
		"refused: the webhook skips SidecarSet "+f.Set+" for a dry-run pod of its template:",
		f.Set+": restarted 0 workloads\n")
	if restarted(t, f, "clash") || restarted(t, f, "web") {
		t.Error("cluster: a workload was restarted")
	}
}

// TestRestartRefusesWhatARecreateWouldBreak: a Deployment with a pod opted
// out by hand (on the pod, not the template) is refused, since its new pods
// would get the sidecars; one under a budget with `selector: {}`, which
// covers the whole namespace, is refused when its pace is more than the
// budget ever allows.
func TestRestartRefusesWhatARecreateWouldBreak(t *testing.T) {
	f := newFixture(t)
	api := f.deployment("api", 1, nil)
	one := intstr.FromInt32(1)
	api.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: &one, MaxSurge: ptr.To(intstr.FromInt32(0))}
	f.Create(f.deployment("web", 2, nil), api,
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "all"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector:       &metav1.LabelSelector{},
		}})
	f.WaitReady(3)
	var optedOut string
	for _, p := range f.Pods() {
		if p.Labels["role"] == "web" {
			optedOut = p.Name
			patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.AnnotationInject + `":"false"}}}`)
			if err := env.Client.Patch(t.Context(), &p, client.RawPatch(types.MergePatchType, patch)); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.WaitStatus("3 unmanaged pods", func(st v1alpha1.SidecarSetStatus) bool { return st.UnmanagedPods == 3 })
	waitBudget(t, f, "all", 0)

	dry := ok(t, "restart", f.Set, "--unmanaged", "--dry-run")
	mustContain(t, dry.out,
		"pod "+f.NS+"/"+optedOut+" ("+optedOut+"): not touched: opted out",
		"Deployment "+f.NS+"/web (web-",
		"refused: pod "+optedOut+" opted out of injection by hand",
		"Deployment "+f.NS+"/api (api-",
		"refused: its rollout takes up to 1 pod down at once (maxUnavailable 1 of 1 replicas), more than PodDisruptionBudget "+f.NS+"/all ever allows (0:",
		"dry run: would restart 0 workloads")
	r := kubectl(t, false, "restart", f.Set, "--unmanaged", "--timeout", "10s")
	if !errors.Is(r.err, cli.ErrRefused) {
		t.Fatalf("error %v, want ErrRefused\n%s", r.err, r.out)
	}
	if restarted(t, f, "web") || restarted(t, f, "api") {
		t.Error("cluster: a refused workload was restarted")
	}
}

// TestRestartInjectionPausedMidRun: the SidecarSet itself is read again
// before each workload, not only the sets its pods record (unmanaged pods
// record none): injection paused while the first workload rolls out keeps
// the second from being recreated without the sidecars.
func TestRestartInjectionPausedMidRun(t *testing.T) {
	f := newFixture(t)
	// a's new pod is ready 3s after it starts: the window to pause in.
	slow := f.deployment("a", 1, func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
			InitialDelaySeconds: 3, PeriodSeconds: 1}
	})
	f.Create(slow, f.deployment("b", 1, nil))
	f.WaitReady(2)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.WaitStatus("2 unmanaged pods", func(st v1alpha1.SidecarSetStatus) bool { return st.UnmanagedPods == 2 })

	done := make(chan result, 1)
	go func() { done <- kubectl(t, false, "restart-unmanaged", f.Set, "--timeout", "60s") }()
	// A test that stops early still waits for the command, which logs
	// through t.
	var r result
	received := false
	t.Cleanup(func() {
		if !received {
			<-done
		}
	})
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return restarted(t, f, "a"), nil
	})
	if err != nil {
		t.Fatalf("a was not restarted: %v", err)
	}
	set := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: f.Set}}
	pause := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"injectionStrategy":{"paused":true}}}`))
	if err := env.Client.Patch(t.Context(), set, pause); err != nil {
		t.Fatal(err)
	}
	r, received = <-done, true
	if !errors.Is(r.err, cli.ErrRefused) {
		t.Fatalf("error %v, want ErrRefused\n%s", r.err, r.out)
	}
	mustContain(t, r.out, "SidecarSet "+f.Set+"'s injectionStrategy.paused is true: recreated, the pods would lack its sidecars")
	if restarted(t, f, "b") {
		t.Error("cluster: b was restarted after the SidecarSet's injection was paused")
	}
}
