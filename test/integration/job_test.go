package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// TestJobWithNativeSidecar: a Job's pod gets an injected native sidecar (an
// init container that keeps running); when the Job's container ends, the
// kubelet stops the sidecar, the pod succeeds and the Job completes. A
// regular sidecar would keep the pod running for ever.
func TestJobWithNativeSidecar(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.Containers = nil
	set.Spec.InitContainers = []v1alpha1.SidecarContainer{{Container: corev1.Container{
		Name: "shipper", Image: "shipper:v1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}}
	f.CreateSet(set)

	p := runJob(t, f)
	if p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("pod %s is %s, want Succeeded", p.Name, p.Status.Phase)
	}
	st := fixture.ContainerStatus(&p, "shipper")
	if fixture.Image(&p, "shipper") != "shipper:v1" || st.State.Terminated == nil {
		t.Errorf("pod %s: native sidecar shipper injected %q, state %+v; want injected and stopped once the Job's container ended",
			p.Name, fixture.Image(&p, "shipper"), st.State)
	}
	if st := fixture.ContainerStatus(&p, "migrate"); st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
		t.Errorf("pod %s: the Job's container ended in state %+v, want exit code 0", p.Name, st.State)
	}
}

// TestJobWithRegularSidecar: a set's regular container goes into a Job's
// pod as a native sidecar (jobPods NativeSidecar, the default), recorded
// there, and the Job completes. With jobPods Keep it stays a regular
// container and the pod's creator gets a warning.
func TestJobWithRegularSidecar(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))

	p := runJob(t, f)
	if c, ok := byName(p.Spec.InitContainers, "exporter"); !ok || c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("pod %s: init containers %v, want exporter there with restartPolicy Always", p.Name, p.Spec.InitContainers)
	}
	if _, ok := byName(p.Spec.Containers, "exporter"); ok {
		t.Errorf("pod %s: exporter is a regular container too", p.Name)
	}
	if st := fixture.ContainerStatus(&p, "exporter"); st.State.Terminated == nil {
		t.Errorf("pod %s: exporter in state %+v, want stopped once the Job's container ended", p.Name, st.State)
	}
	state, err := revision.Decode(p.Annotations)
	if rec := state[f.Set]; err != nil || len(rec.Containers) != 1 || !rec.Containers[0].Init {
		t.Errorf("pod %s: record %+v (%v), want exporter recorded as an init container", p.Name, rec, err)
	}

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.JobPods = v1alpha1.JobPodsKeep })
	w := &warnings{}
	cfg := rest.CopyConfig(f.C.Env.Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: f.C.Env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	// The webhook's cache sees the change shortly after the write.
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		pod = f.NewPod("kept")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		f.C.FitPod(&pod.Spec)
		if err := c.Create(ctx, pod, client.DryRunAll); err != nil {
			return false, err
		}
		_, ok := byName(pod.Spec.Containers, "exporter")
		return ok, nil
	})
	if err != nil {
		t.Fatalf("wait for a dry-run pod with exporter as a regular container: %v; containers %v", err, pod.Spec.Containers)
	}
	if want := `container "exporter" is a regular container in a pod with restartPolicy Never`; !strings.Contains(w.all(), want) {
		t.Errorf("warnings %q, want one saying %q", w.all(), want)
	}
}

// runJob runs a Job whose pod's container completes and returns its pod
// once the Job has succeeded.
func runJob(t *testing.T, f *testFixture) corev1.Pod {
	t.Helper()
	template := f.NewPod("")
	template.Spec.RestartPolicy = corev1.RestartPolicyNever
	template.Spec.Containers[0] = corev1.Container{Name: "migrate", Image: "migrate-completes:v1"}
	f.C.FitPod(&template.Spec)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.NS, Name: "migrate"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template:     corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: f.Labels}, Spec: template.Spec},
		},
	}
	if err := f.Client.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("the Job failed: %s", c.Message)
			}
		}
		return job.Status.Succeeded == 1, nil
	})
	if err != nil {
		t.Fatalf("wait for the Job to complete: %v; status %+v\n%s", err, job.Status, f.Describe())
	}
	pods := f.Pods()
	if len(pods) != 1 {
		t.Fatalf("the Job made %d pods, want 1\n%s", len(pods), f.Describe())
	}
	return pods[0]
}

func byName(cs []corev1.Container, name string) (corev1.Container, bool) {
	for _, c := range cs {
		if c.Name == name {
			return c, true
		}
	}
	return corev1.Container{}, false
}

// warnings collects the admission warnings the apiserver relays.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "\n")
}
