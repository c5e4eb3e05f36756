package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// installManifest is what `kubectl apply -f` installs
// without Helm: the chart rendered with its defaults into the namespace
// sidecarset-system, with that namespace and the CRDs first, and without
// the label that says Helm manages it.
var installManifest = filepath.Join(configDir, "install", "install.yaml")

// helmManaged is the line of the label that says Helm manages an object.
var helmManaged = regexp.MustCompile(`(?m)^ *app\.kubernetes\.io/managed-by: Helm\n`)

// TestInstallManifest checks that config/install/install.yaml is the
// chart as it renders now. Rewrite it with
// go test -run TestInstallManifest -update
func TestInstallManifest(t *testing.T) {
	manifest, _, err := install(t, configNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	const header = `# The sidecarset manager as the chart installs it with its defaults, into
# the namespace sidecarset-system, for those who install without Helm:
#   kubectl apply -f install.yaml   (or -k on this folder, for kustomize)
# Applied again, a newer one upgrades it, CRD included. Generated from
# charts/sidecarset by test/chart (make manifests); do not edit.
`
	fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", configNamespace)
	for _, crd := range loadChart(t).CRDObjects() {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s", crd.Name, strings.TrimPrefix(string(crd.File.Data), "---\n"))
	}
	// Not Helm's to manage: kubectl, Argo CD or Flux applies it.
	b.WriteString(helmManaged.ReplaceAllString(manifest, ""))
	// Every object decodes strictly, none twice.
	decodeAll(t, b.String())
	got := header + b.String()
	if *update {
		if err := os.WriteFile(installManifest, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(installManifest)
	if err != nil {
		t.Fatalf("%v (go test -run TestInstallManifest -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s is not the chart as it renders now; go test -run TestInstallManifest -update (-file +render):\n%s", installManifest, diff)
	}
}
