package crd_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallManifest applies config/install as its comments say, with
// kustomize, to a real apiserver: every object is accepted, the CRD is
// established, and applying it again changes nothing.
func TestInstallManifest(t *testing.T) {
	kubectl := kubectlFor(t, startAPIServer(t))
	install := filepath.Join(repoRoot, "config", "install")
	out := kubectl("apply", "-k", install)
	for _, want := range []string{"namespace/sidecarset-system created", "deployment.apps/sidecarset-manager created",
		"customresourcedefinition.apiextensions.k8s.io/" + crdName + " created"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply printed no %q:\n%s", want, out)
		}
	}
	kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd/"+crdName)
	versions := func() string {
		return kubectl("get", "-k", install, "-o", `jsonpath={range .items[*]}{.kind}/{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}`)
	}
	before := versions()
	if !strings.Contains(before, "Deployment/sidecarset-manager ") {
		t.Fatalf("kubectl get -k config/install lists no Deployment sidecarset-manager:\n%s", before)
	}
	kubectl("apply", "-k", install)
	if after := versions(); after != before {
		t.Errorf("applying config/install again changed objects:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
