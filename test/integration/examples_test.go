package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/examples"
)

// TestExampleSidecarSets: every example SidecarSet is accepted as written,
// by the CRD's schema and the validating webhook (a server-side dry run).
// In a file of several, the ones before the last are created for real (and
// deleted after), as a canary needs its base.
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
			docs := documents(t, b)
			for i, doc := range docs {
				set := &v1alpha1.SidecarSet{}
				if err := yaml.UnmarshalStrict(doc, set); err != nil {
					t.Fatalf("decode document %d: %v", i, err)
				}
				if i == len(docs)-1 {
					if err := env.Client.Create(t.Context(), set, client.DryRunAll); err != nil {
						t.Errorf("the apiserver refuses the example's document %d: %v", i, err)
					}
					break
				}
				if err := env.Client.Create(t.Context(), set); err != nil {
					t.Fatalf("the apiserver refuses the example's document %d: %v", i, err)
				}
				t.Cleanup(func() {
					if err := env.Client.Delete(context.Background(), set); client.IgnoreNotFound(err) != nil {
						t.Errorf("delete %s: %v", set.Name, err)
					}
				})
			}
		})
	}
}

// documents splits a YAML stream into its documents.
func documents(t *testing.T, b []byte) [][]byte {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("split documents: %v", err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			out = append(out, doc)
		}
	}
}
