package config_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sidecarset/sidecarset/internal/testenv"
)

// TestInstallManifest applies config/install as its comments say, with
// kustomize, to a real apiserver: every object is accepted, the CRD is
// established, and applying it again changes nothing.
func TestInstallManifest(t *testing.T) {
	env, err := testenv.Start(testenv.Options{WithoutCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	assets, err := testenv.Assets()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	out := kubectl("apply", "-k", "install")
	for _, want := range []string{"namespace/sidecarset-system created", "deployment.apps/sidecarset-manager created",
		"customresourcedefinition.apiextensions.k8s.io/sidecarsets.sidecarset.dev created"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply printed no %q:\n%s", want, out)
		}
	}
	kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd/sidecarsets.sidecarset.dev")
	versions := func() string {
		return kubectl("get", "-k", "install", "-o", "jsonpath={range .items[*]}{.kind}/{.metadata.name} {.metadata.resourceVersion}{\"\\n\"}{end}")
	}
	before := versions()
	if !strings.Contains(before, "Deployment/sidecarset-manager ") {
		t.Fatalf("kubectl get -k config/install lists no Deployment sidecarset-manager:\n%s", before)
	}
	kubectl("apply", "-k", "install")
	if after := versions(); after != before {
		t.Errorf("applying config/install again changed objects:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
