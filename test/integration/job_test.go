package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
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
	p := pods[0]
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
