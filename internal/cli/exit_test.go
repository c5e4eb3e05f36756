package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

func TestExitCode(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{fmt.Errorf("s: %w (ProgressDeadlineExceeded): slow", ErrStalled), 1},
		{fmt.Errorf("step 1: %w: 2 updated pods not ready", ErrAnomaly), 1},
		{errors.New("get SidecarSet s: not found"), 1},
		{fmt.Errorf("s: %w 1 workload", ErrRefused), 1},
		{usageErrorf("--timeout 0s: must be positive"), 2},
		{usageError(errors.New(`unknown flag: --nope`)), 2},
		{fmt.Errorf("s: rollout %w: spec.updateStrategy.paused is true", ErrPaused), 3},
		{fmt.Errorf("%w: %w: spec.updateStrategy.paused was set by someone else", ErrAnomaly, ErrPaused), 3},
		{fmt.Errorf("%w: %w: not done within 5m (--wait-ready)", ErrAnomaly, ErrTimeout), 4},
		{fmt.Errorf("s: %w: not complete within --timeout 1s", ErrTimeout), 4},
		{fmt.Errorf("%w: load the kubeconfig: no such file", ErrUnreachable), 5},
		{fmt.Errorf("get SidecarSet s: %w", refused), 5},
		// Unreachable wins over a timeout that followed from it.
		{fmt.Errorf("%w: %w", ErrTimeout, ErrUnreachable), 5},
		{context.Canceled, 1},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestExitCodesHelp(t *testing.T) {
	help := exitCodesHelp()
	for code := 0; code <= 5; code++ {
		if !strings.Contains(help, fmt.Sprintf("\n  %d  ", code)) {
			t.Errorf("exit code %d missing from:\n%s", code, help)
		}
	}
	if strings.Index(help, "\n  3  ") > strings.Index(help, "\n  4  ") {
		t.Errorf("codes not in order:\n%s", help)
	}
}

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "sidecarsets"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{apierrors.NewConflict(gr, "s", errors.New("modified")), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewInternalError(errors.New(`failed calling webhook "sidecarsets.sidecarset.dev"`)), true},
		{apierrors.NewTimeoutError("slow", 1), true},
		{apierrors.NewGenericServerResponse(502, "get", gr, "s", "bad gateway", 0, true), true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{apierrors.NewNotFound(gr, "s"), false},
		{apierrors.NewForbidden(gr, "s", errors.New("no")), false},
		{apierrors.NewBadRequest("bad"), false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestRetryBounds: a waiting verb with a deadline of its own retries
// transient errors until it (an outage longer than the back-off's steps
// ends as a timeout, not as "unreachable"); without one, the steps bound
// the retries; a webhook the apiserver cannot call is not the apiserver
// being unreachable.
func TestRetryBounds(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("restarting")
	webhook := apierrors.NewInternalError(errors.New(`failed calling webhook "pods.sidecarset.dev": failed to call webhook: connection refused`))
	quick := wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}
	tests := []struct {
		name     string
		deadline time.Duration
		err      error
		wantCode int
		wantTry  func(int) bool
	}{
		{"no deadline: the steps bound it", 0, unavailable, 5, func(n int) bool { return n == 3 }},
		{"a deadline: tried until it", 200 * time.Millisecond, unavailable, -1, func(n int) bool { return n > 3 }},
		{"a webhook the apiserver cannot call", 0, webhook, 1, func(n int) bool { return n == 3 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			r := &retryingClient{backoff: quick, warn: io.Discard}
			tries := 0
			err := r.do(ctx, "get", func() error { tries++; return tt.err })
			if !tt.wantTry(tries) {
				t.Errorf("%d tries", tries)
			}
			if tt.wantCode >= 0 && ExitCode(err) != tt.wantCode {
				t.Errorf("exit code %d for %v, want %d", ExitCode(err), err, tt.wantCode)
			}
			if tt.deadline > 0 && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v, want the deadline's", err)
			}
		})
	}
}

func TestVerdictOf(t *testing.T) {
	complete := condition(v1alpha1.ConditionComplete, metav1.ConditionTrue, "RolloutComplete")
	notComplete := condition(v1alpha1.ConditionComplete, metav1.ConditionFalse, "Paused")
	stalled := condition(v1alpha1.ConditionStalled, metav1.ConditionTrue, "ProgressDeadlineExceeded")
	partitionReached := condition(v1alpha1.ConditionComplete, metav1.ConditionTrue, "PartitionReached")
	notReadyLeft := condition(v1alpha1.ConditionComplete, metav1.ConditionFalse, "PodsNotReady")
	recreatesLeft := condition(v1alpha1.ConditionComplete, metav1.ConditionFalse, "PodsNeedRecreate")
	paused := func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = true }
	notUpdate := func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Type = v1alpha1.NotUpdateStrategy }
	for _, tc := range []struct {
		name string
		set  *v1alpha1.SidecarSet
		want string
	}{
		{"stalled and paused by the controller", setWith(4, "0", stalled, notComplete, paused), "stalled"},
		{"complete", setWith(4, "0", complete), "complete"},
		{"complete, paused", setWith(4, "0", complete, paused), "complete"},
		{"NotUpdate, complete", setWith(4, "0", complete, notUpdate), "halted"},
		{"paused, not complete", setWith(4, "0", notComplete, paused), "halted"},
		{"moving", setWith(4, "0", notComplete), ""},
		{"the partition keeps the rest", setWith(4, "2", partitionReached), "held"},
		{"only pods never ready left", setWith(4, "0", notReadyLeft), "held"},
		{"only pods that need a recreate left", setWith(4, "0", recreatesLeft), "held"},
		{"status behind", setWith(4, "0", complete, notUpdate, func(s *v1alpha1.SidecarSet) { s.Generation = 3 }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := verdictOf(tc.set)
			got := ""
			switch {
			case v.stalled:
				got = "stalled"
			case v.complete:
				got = "complete"
			case v.halted:
				got = "halted"
			case v.held:
				got = "held"
			}
			if got != tc.want {
				t.Errorf("verdict %q (%+v), want %q", got, v, tc.want)
			}
		})
	}
}

// TestPace mirrors the worked cases of pace.
func TestPace(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.Parse(s); return &v }
	deploy := func(n int32, mu, ms string) *appsv1.Deployment {
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To(n), Strategy: appsv1.DeploymentStrategy{
			Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: pct(mu), MaxSurge: pct(ms)}}}}
	}
	sts := func(n int32, mu *intstr.IntOrString) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(n)}}
		if mu != nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: mu}
		}
		return s
	}
	ds := func(n int32, mu, ms string) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: n}}
		d.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: pct(mu), MaxSurge: pct(ms)}
		return d
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
		want int32
		how  string
	}{
		{"Deployment 8 at 25%", deploy(8, "25%", "25%"), 2, "maxUnavailable 25% of 8 replicas"},
		{"Deployment 3 at 25%: surge first", deploy(3, "25%", "25%"), 0, "maxUnavailable 25% of 3 replicas"},
		{"Deployment both 0", deploy(3, "0", "0"), 1, "maxUnavailable 0 of 3 replicas"},
		{"Deployment defaults", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](8)}}, 2, "maxUnavailable 25% of 8 replicas"},
		{"Deployment Recreate", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](5),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}}, 5, "strategy Recreate, 5 replicas"},
		{"StatefulSet default", sts(6, nil), 1, "maxUnavailable 1 of 6 replicas"},
		{"StatefulSet 50%", sts(6, pct("50%")), 3, "maxUnavailable 50% of 6 replicas"},
		{"DaemonSet 25% of 4", ds(4, "25%", "0"), 1, "maxUnavailable 25% of 4 scheduled pods"},
		{"DaemonSet surge", ds(4, "0", "1"), 0, "maxUnavailable 0 of 4 scheduled pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, how := pace(tc.obj)
			if got != tc.want || how != tc.how {
				t.Errorf("pace = %d, %q; want %d, %q", got, how, tc.want, tc.how)
			}
		})
	}
}

// TestJudgeBudgets mirrors the worked cases of judgeBudgets.
func TestJudgeBudgets(t *testing.T) {
	over8 := func(allowed int32) budget {
		return budget{name: "ns/web", observed: true, allowed: allowed, expected: 8, desiredHealthy: 7}
	}
	for _, tc := range []struct {
		name         string
		down         int32
		budgets      []budget
		refuse, wait string
	}{
		{"faster than the budget ever allows", 2, []budget{over8(1)},
			"its rollout takes up to 2 pods down at once (maxUnavailable 25% of 8 replicas), more than PodDisruptionBudget ns/web ever allows (1: 8 expected pods, 7 desired healthy); lower the workload's maxUnavailable to 1, or loosen the budget", ""},
		{"within the budget", 1, []budget{over8(1)}, "", ""},
		{"a pod down already", 1, []budget{over8(0)}, "",
			"PodDisruptionBudget ns/web allows 0 disruptions now (status.disruptionsAllowed), the rollout takes up to 1 at once"},
		{"surge only", 0, []budget{over8(0)}, "", ""},
		{"not evaluated", 1, []budget{{name: "ns/web"}}, "", "PodDisruptionBudget ns/web is not evaluated yet (status.observedGeneration behind)"},
		{"a budget allowing nothing ever", 1, []budget{{name: "ns/web", observed: true, expected: 2, desiredHealthy: 2}},
			"its rollout takes up to 1 pod down at once (maxUnavailable 25% of 8 replicas), more than PodDisruptionBudget ns/web ever allows (0: 2 expected pods, 2 desired healthy); lower the workload's maxUnavailable to 0, or loosen the budget", ""},
		{"no budget", 3, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refuse, wait := judgeBudgets(tc.down, "maxUnavailable 25% of 8 replicas", tc.budgets)
			if refuse != tc.refuse || wait != tc.wait {
				t.Errorf("judgeBudgets = %q, %q;\nwant %q, %q", refuse, wait, tc.refuse, tc.wait)
			}
		})
	}
}
