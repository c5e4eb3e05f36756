//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/internal/realnode"
)

// The exporter image of test/images/exporter, as startNode imports it.
const (
	exporterImage   = "sidecarset.test/exporter:e1"
	exporterVersion = "e1"
)

// exporterGrace is the exporter pod's termination grace period; a graceful
// stop takes a small part of it, a SIGTERM that does not reach the exporter
// all of it.
const exporterGrace = 30 * time.Second

// TestExporter runs the exporter image on the real node: it becomes Ready
// through its httpGet readiness probe, serves its version series through
// the apiserver's pod proxy, and on deletion stops on SIGTERM with exit
// code 0 long before its grace period ends.
func TestExporter(t *testing.T) {
	sys, _ := startNode(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(sys.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	pods := cs.CoreV1().Pods("default")
	port := intstr.FromInt32(realnode.ExporterPort)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "exporter"},
		Spec: corev1.PodSpec{
			NodeName:                      realnode.NodeName,
			DNSPolicy:                     corev1.DNSDefault,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(exporterGrace / time.Second)),
			Containers: []corev1.Container{{
				Name:            "exporter",
				Image:           exporterImage,
				ImagePullPolicy: corev1.PullNever,
				Ports:           []corev1.ContainerPort{{Name: "metrics", ContainerPort: realnode.ExporterPort}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: port}},
					PeriodSeconds: 1,
				},
				LivenessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	created := time.Now()
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ready *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		ready, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && podReady(ready), err
	})
	if err != nil {
		t.Fatalf("wait for pod %s to be Ready: %v; its status: %+v", pod.Name, err, ready.Status)
	}
	t.Logf("pod Ready %v after its creation", time.Since(created).Round(time.Millisecond))

	proxyGet := func(path string) string {
		t.Helper()
		body, err := pods.ProxyGet("http", pod.Name, strconv.Itoa(realnode.ExporterPort), path, nil).DoRaw(ctx)
		if err != nil {
			t.Fatalf("GET %s of pod %s through the apiserver: %v", path, pod.Name, err)
		}
		return string(body)
	}
	if got := proxyGet("/version"); got != exporterVersion+"\n" {
		t.Errorf("/version = %q, want %q", got, exporterVersion+"\n")
	}
	metrics := proxyGet("/metrics")
	info := fmt.Sprintf("sidecarset_test_exporter_info{version=%q} 1", exporterVersion)
	if !containsLine(metrics, info) {
		t.Errorf("/metrics lacks %q:\n%s", info, metrics)
	}
	// The kubelet's readiness probes reached the exporter itself.
	m := regexp.MustCompile(`(?m)^sidecarset_test_exporter_http_requests_total\{code="200",handler="ready"\} (\d+)$`).FindStringSubmatch(metrics)
	if m == nil || m[1] == "0" {
		t.Errorf("/metrics counts no answered readiness probe:\n%s", metrics)
	}

	// Watch from the last state read, so that no status the kubelet writes
	// while stopping the container is missed.
	w, err := pods.Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", pod.Name).String(),
		ResourceVersion: ready.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	deleted := time.Now()
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(exporterGrace / time.Second))}); err != nil {
		t.Fatal(err)
	}
	var terminated *corev1.ContainerStateTerminated
	var stoppedAfter time.Duration
	timeout := time.After(exporterGrace + 15*time.Second)
	for gone := false; !gone; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch on the pod ended before the pod was gone")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				t.Fatalf("watch event %s carries %T, not a pod", ev.Type, ev.Object)
			}
			if s := containerState(p, "exporter"); terminated == nil && s != nil && s.Terminated != nil {
				terminated, stoppedAfter = s.Terminated, time.Since(deleted)
			}
			gone = ev.Type == watch.Deleted
		case <-timeout:
			t.Fatalf("pod %s still there %v after its deletion", pod.Name, exporterGrace+15*time.Second)
		}
	}
	goneAfter := time.Since(deleted)
	t.Logf("container reported terminated %v after the deletion, pod gone after %v", stoppedAfter.Round(time.Millisecond), goneAfter.Round(time.Millisecond))
	if terminated == nil {
		t.Fatal("the kubelet never reported the exporter container as terminated before the pod was gone")
	}
	if terminated.ExitCode != 0 || terminated.Reason != "Completed" {
		t.Errorf("the exporter ended with exit code %d (%s), want 0 (Completed): SIGTERM was not handled", terminated.ExitCode, terminated.Reason)
	}
	// The kubelet waits out the grace period before SIGKILL; a fifth of it
	// leaves the graceful stop ample room and still tells the two apart.
	if limit := exporterGrace / 5; stoppedAfter > limit || goneAfter > limit {
		t.Errorf("the exporter stopped %v and its pod was gone %v after the deletion, want both within %v of a %v grace period",
			stoppedAfter.Round(time.Millisecond), goneAfter.Round(time.Millisecond), limit, exporterGrace)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func containerState(p *corev1.Pod, name string) *corev1.ContainerState {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name {
			return &s.State
		}
	}
	return nil
}

func containsLine(text, line string) bool {
	for l := range strings.SplitSeq(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}
