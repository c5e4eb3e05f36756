package integration

import (
	"io/fs"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/examples"
)

// TestExampleSidecarSets: every example SidecarSet is accepted as written,
// by the CRD's schema and the validating webhook (a server-side dry run).
func TestExampleSidecarSets(t *testing.T) {
	files, err := fs.Glob(examples.SidecarSets, "sidecarsets/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example SidecarSets embedded (%v)", err)
	}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			b, err := examples.SidecarSets.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			set := &v1alpha1.SidecarSet{}
			if err := yaml.UnmarshalStrict(b, set); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if err := env.Client.Create(t.Context(), set, client.DryRunAll); err != nil {
				t.Errorf("the apiserver refuses the example: %v", err)
			}
		})
	}
}
