package cli_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/internal/cli"
)

// TestVersion: --client needs no cluster; the manager's version is its
// Deployment's image, and a missing Deployment is an error that says where
// it looked.
func TestVersion(t *testing.T) {
	r := ok(t, "version", "--client")
	if !strings.HasPrefix(r.out, "Client: devel") || strings.Contains(r.out, "Manager") {
		t.Errorf("version --client printed %q, want the client's devel version alone", r.out)
	}

	f := newFixture(t)
	r = kubectl(t, false, "version", "--manager-namespace", f.NS)
	if cli.ExitCode(r.err) != 1 || r.err == nil || !strings.Contains(r.err.Error(), "no Deployment sidecarset-manager in namespace "+f.NS) {
		t.Errorf("version without the manager's Deployment: exit %d, %v; want 1 naming it", cli.ExitCode(r.err), r.err)
	}

	labels := map[string]string{"app": "sidecarset-manager"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.NS, Name: cli.ManagerDeployment},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "ghcr.io/sidecarset/sidecarset-manager:v9.9.9"}}},
			},
		},
	}
	if err := f.Client.Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	r = ok(t, "version", "--manager-namespace", f.NS)
	// The test cluster may have started its pod already.
	want := "Manager: ghcr.io/sidecarset/sidecarset-manager:v9.9.9 (Deployment " + f.NS + "/sidecarset-manager, "
	if !strings.Contains(r.out, want) || !strings.Contains(r.out, " of 1 replicas ready)") || !strings.HasPrefix(r.out, "Client: devel") {
		t.Errorf("version printed:\n%s\nwant the client's version and %q... of 1 replicas ready)", r.out, want)
	}
}
