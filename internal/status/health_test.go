package status

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	lua "github.com/yuin/gopher-lua"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/config"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// TestHealth: what GitOps tools make of the status Compute writes, by
// their own rules: kstatus (Flux, kpt, cli-utils), and Argo CD running
// config/argocd/health.lua as it runs health checks (gopher-lua, the
// object as a table of its JSON).
func TestHealth(t *testing.T) {
	paused := rolling("0")
	paused.Paused = true
	stalledBefore := statusOf(12, 4, 11, 3, conds(
		cond{no, ReasonProgressDeadlineExceeded, "no progress", hourAgo},
		cond{no, ReasonProgressDeadlineExceeded, "no progress", hourAgo},
		cond{yes, ReasonProgressDeadlineExceeded, "no progress", hourAgo}))
	stalledBefore.LatestRevision = latest.Name
	tests := []struct {
		name       string
		pods       []rollout.Pod
		strategy   v1alpha1.UpdateStrategy
		previous   v1alpha1.SidecarSetStatus
		generation int64 // of the set; Compute observes the package's generation
		kstatus    kstatus.Status
		argo       string
	}{
		{"a rollout moving pods", fleet(12, mix{UpdatedReady: 3, Updating: 1}), rolling("0"), v1alpha1.SidecarSetStatus{}, generation,
			kstatus.InProgressStatus, "Progressing"},
		{"complete", fleet(12, mix{UpdatedReady: 12}), rolling("0"), v1alpha1.SidecarSetStatus{}, generation,
			kstatus.CurrentStatus, "Healthy"},
		{"the partition reached", fleet(12, mix{UpdatedReady: 6}), rolling("50%"), v1alpha1.SidecarSetStatus{}, generation,
			kstatus.CurrentStatus, "Healthy"},
		{"paused by hand mid-rollout", fleet(12, mix{UpdatedReady: 3}), paused, v1alpha1.SidecarSetStatus{}, generation,
			kstatus.CurrentStatus, "Suspended"},
		{"stalled, and paused by the controller", fleet(12, mix{UpdatedReady: 3, Updating: 1}), paused, stalledBefore, generation,
			kstatus.FailedStatus, "Degraded"},
		{"pods written while not ready that stay so", fleet(12, mix{UpdatedReady: 10, WrittenNotReady: 2}), rolling("0"), v1alpha1.SidecarSetStatus{}, generation,
			kstatus.CurrentStatus, "Degraded"},
		{"a new spec not observed yet", fleet(12, mix{UpdatedReady: 12}), rolling("0"), v1alpha1.SidecarSetStatus{}, generation + 1,
			kstatus.InProgressStatus, "Progressing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := rollout.Next(rollout.Input{Latest: latest, Pods: tt.pods, Strategy: tt.strategy})
			if err != nil {
				t.Fatal(err)
			}
			st := Compute(Input{Generation: generation, Latest: latest, Pods: tt.pods, Plan: plan, Strategy: tt.strategy,
				Previous: tt.previous, Now: metav1.NewTime(now.Add(time.Second))}).Status
			set := &v1alpha1.SidecarSet{
				TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "SidecarSet"},
				ObjectMeta: metav1.ObjectMeta{Name: "exporter", Generation: tt.generation},
				Spec:       v1alpha1.SidecarSetSpec{UpdateStrategy: tt.strategy},
				Status:     st,
			}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(set)
			if err != nil {
				t.Fatal(err)
			}
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.kstatus {
				t.Errorf("kstatus: %s (%s), want %s", res.Status, res.Message, tt.kstatus)
			}
			health, message := argoHealth(t, obj)
			if health != tt.argo || message == "" {
				t.Errorf("Argo CD: %s %q, want %s with a message", health, message, tt.argo)
			}
		})
	}
}

// argoHealth runs the health check on obj as Argo CD does: obj is a
// global table, and the script returns a table with status and message.
func argoHealth(t *testing.T, obj map[string]any) (status, message string) {
	t.Helper()
	l := lua.NewState()
	defer l.Close()
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(config.ArgoCDHealth); err != nil {
		t.Fatalf("health.lua: %v", err)
	}
	hs, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("health.lua returned %v, want a table", l.Get(-1))
	}
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
}

// toLua converts a value of decoded JSON to Lua: objects and arrays to
// tables, numbers to numbers.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case map[string]any:
		tb := l.NewTable()
		for k, e := range v {
			tb.RawSetString(k, toLua(l, e))
		}
		return tb
	case []any:
		tb := l.NewTable()
		for _, e := range v {
			tb.Append(toLua(l, e))
		}
		return tb
	}
	panic(fmt.Sprintf("no Lua value for %T", v))
}
