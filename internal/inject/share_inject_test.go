package inject_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// TestInjectShares: a sidecar that shares volumes and copies env takes them
// from the pod's app containers only, never from other sets' sidecars
// (injected before or in the same call), and a transferEnv it cannot honour
// draws a warning and an event, never a refusal.
func TestInjectShares(t *testing.T) {
	logs := corev1.Volume{Name: "logs"}
	proxySet := testutil.SidecarSet("a-proxy").Selector(dbLabels).
		Containers(guaranteed("proxy", proxyImage).VolumeMount("proxy-cfg", "/etc/proxy").Sidecar("")).
		Volumes(corev1.Volume{Name: "proxy-cfg"}).Obj()
	oldSet := testutil.SidecarSet("old").Selector(dbLabels).
		Containers(guaranteed("old-agent", exporterImage).VolumeMount("old", "/old").Sidecar("")).Obj()
	shipper := guaranteed("shipper", logImage).Sidecar(v1alpha1.AfterAppContainer)
	shipper.ShareVolumePolicy = &v1alpha1.SharePolicy{Type: v1alpha1.SharePolicyEnabled}
	shipper.TransferEnv = []v1alpha1.TransferEnvVar{
		{SourceContainerName: "app", EnvName: "LOG_LEVEL"},
		{SourceContainerName: "proxy", EnvName: "PROXY_PORT"},
	}
	shipSet := testutil.SidecarSet("b-ship").Selector(dbLabels).Containers(shipper).Obj()

	app := guaranteed("app", appImage).VolumeMount("logs", "/var/log/app").Obj()
	app.Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}
	oldEntry := revision.State{"old": entry(oldSet, ctr("old-agent", exporterImage))}
	pod := testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).Annotations(records(oldEntry)).
		Containers(oldSet.Spec.Containers[0].Container, app).
		Volumes(logs, corev1.Volume{Name: "old"}).Obj()

	res := inject.Inject(pod, shop, []*v1alpha1.SidecarSet{shipSet, proxySet}, opts)

	wantShipper := guaranteed("shipper", logImage).VolumeMount("logs", "/var/log/app").Obj()
	wantShipper.Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}
	want := testutil.Pod("shop", "db-0").Labels(dbLabels).Labels(managed).
		Annotations(records(revision.State{
			"old":     oldEntry["old"],
			"a-proxy": entry(proxySet, ctr("proxy", proxyImage)),
			"b-ship":  entry(shipSet, ctr("shipper", logImage)),
		})).
		Containers(proxySet.Spec.Containers[0].Container, oldSet.Spec.Containers[0].Container, app, wantShipper).
		Volumes(logs, corev1.Volume{Name: "old"}, corev1.Volume{Name: "proxy-cfg"}).Obj()
	if diff := cmp.Diff(want, res.Pod); diff != "" {
		t.Errorf("pod (-want +got):\n%s", diff)
	}
	warning := `SidecarSet "b-ship" container "shipper" transferEnv[1]: the pod has no app container named "proxy"; nothing copied`
	if diff := cmp.Diff([]string{warning}, res.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]inject.Event{{Set: "b-ship", Reason: inject.ReasonInjectionWarning, Message: warning}}, res.Events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
