// Package crd_test installs the SidecarSet CRD on a real kube-apiserver the
// ways the documentation gives, a client-side `kubectl apply -f config/crd`
// and the chart's `kubectl apply --server-side -f crds/`, and reads it back
// as a user does: `kubectl explain`, and the OpenAPI document it reads.
package crd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"github.com/sidecarset/sidecarset/internal/testenv"
)

const (
	repoRoot = "../.."
	crdName  = "sidecarsets.sidecarset.dev"
	// lastApplied is the annotation a client-side `kubectl apply` keeps the
	// whole applied object in; with the other annotations it must fit in
	// validation.TotalAnnotationSizeLimitB.
	lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
)

// TestExplain applies the CRD with a client-side `kubectl apply` (the
// whole CRD, descriptions included, must fit in its annotation), then as
// the chart's notes say before an upgrade, with `--server-side`; then checks
// that what the apiserver publishes describes every field of a SidecarSet's
// spec and status, and that `kubectl explain` prints the descriptions the
// Go types in api/v1alpha1 give them.
func TestExplain(t *testing.T) {
	began := time.Now()
	env := startAPIServer(t)
	kubectl := kubectlFor(t, env)

	// A client-side apply, as for the manifests under config/: the
	// annotation holds the whole CRD, descriptions included.
	kubectl("apply", "-f", filepath.Join(repoRoot, "config", "crd"))
	annotations := kubectl("get", "crd", crdName, "-o", "jsonpath={.metadata.annotations}")
	var got map[string]string
	if err := json.Unmarshal([]byte(annotations), &got); err != nil {
		t.Fatalf("annotations of %s: %v\n%s", crdName, err, annotations)
	}
	if got[lastApplied] == "" {
		t.Errorf("a client-side apply left no %s annotation: %v", lastApplied, got)
	}
	size := 0
	for k, v := range got {
		size += len(k) + len(v)
	}
	t.Logf("client-side apply: the %s annotation holds %d bytes; all annotations %d of the %d allowed",
		lastApplied, len(got[lastApplied]), size, validation.TotalAnnotationSizeLimitB)
	// What the chart's notes give for an upgrade; Helm itself creates the
	// CRD from crds/ without an annotation.
	kubectl("apply", "--server-side", "-f", filepath.Join(repoRoot, "charts", "sidecarset", "crds"))
	kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/"+crdName)

	crd := installedCRD(t)
	checkPublished(t, env, crd)
	checkExplain(t, kubectl, crd)
	t.Logf("whole test: %v", time.Since(began).Round(time.Millisecond))
}

// kubectlFor returns a function that runs the kubectl of the control-plane
// assets against env, with a discovery cache of its own, and fails the test
// when kubectl fails.
// startAPIServer starts etcd and kube-apiserver without the project's
// CRDs, stopped when the test ends.
func startAPIServer(t *testing.T) *testenv.Env {
	t.Helper()
	began := time.Now()
	env, err := testenv.Start(testenv.Options{WithoutCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("apiserver up in %v", time.Since(began).Round(time.Millisecond))
	return env
}

func kubectlFor(t *testing.T, env *testenv.Env) func(args ...string) string {
	assets, err := testenv.Assets()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) string {
		t.Helper()
		args = append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)
		cmd := exec.CommandContext(t.Context(), filepath.Join(assets, "kubectl"), args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args[4:], " "), err, out, stderr.String())
		}
		return string(out)
	}
}

// installedCRD returns the CRD as checked in, the source of the
// descriptions kubectl must show.
func installedCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := testenv.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if crd.Name == crdName {
			return crd
		}
	}
	t.Fatalf("no CRD %s under config/crd", crdName)
	return nil
}

// checkPublished reads the OpenAPI v3 document the apiserver publishes for
// sidecarset.dev/v1alpha1, the one `kubectl explain` reads, and checks
// that every field under spec and status, at any depth, has a
// description.
func checkPublished(t *testing.T, env *testenv.Env, crd *apiextensionsv1.CustomResourceDefinition) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	gv := "apis/" + crd.Spec.Group + "/" + crd.Spec.Versions[0].Name
	key := "dev.sidecarset." + crd.Spec.Versions[0].Name + "." + crd.Spec.Names.Kind
	var doc struct {
		Components struct {
			Schemas map[string]schema `json:"schemas"`
		} `json:"components"`
	}
	// The apiserver publishes a new CRD's schema shortly after it is
	// Established.
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		paths, err := dc.OpenAPIV3().Paths()
		if err != nil {
			return false, err
		}
		p, ok := paths[gv]
		if !ok {
			return false, nil
		}
		b, err := p.Schema("application/json")
		if err != nil {
			return false, err
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return false, fmt.Errorf("decode the OpenAPI of %s: %w", gv, err)
		}
		_, ok = doc.Components.Schemas[key]
		return ok, nil
	})
	if err != nil {
		t.Fatalf("the apiserver's OpenAPI v3 for %s has no %s: %v", gv, key, err)
	}
	set := doc.Components.Schemas[key]
	var missing []string
	fields := 0
	for _, top := range []string{"spec", "status"} {
		s, ok := set.Properties[top]
		if !ok {
			t.Fatalf("the published %s has no %s", key, top)
		}
		s.walk(top, func(path string, s schema) {
			fields++
			if strings.TrimSpace(s.Description) == "" {
				missing = append(missing, path)
			}
		})
	}
	t.Logf("the published schema describes %d of %d fields under spec and status", fields-len(missing), fields)
	if len(missing) > 0 {
		t.Errorf("fields the apiserver publishes without a description (kubectl explain prints <no description>):\n  %s",
			strings.Join(missing, "\n  "))
	}
}

// schema is the part of an OpenAPI schema that holds fields and their
// descriptions.
type schema struct {
	Description          string            `json:"description"`
	Properties           map[string]schema `json:"properties"`
	Items                *schema           `json:"items"`
	AdditionalProperties json.RawMessage   `json:"additionalProperties"`
}

// walk calls f for s, named path, and every field below it: properties,
// list items and map values belong to the field that holds them.
func (s schema) walk(path string, f func(string, schema)) {
	f(path, s)
	s.below(path, f)
}

func (s schema) below(path string, f func(string, schema)) {
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		s.Properties[name].walk(path+"."+name, f)
	}
	if s.Items != nil {
		s.Items.below(path+"[]", f)
	}
	var values schema
	if json.Unmarshal(s.AdditionalProperties, &values) == nil {
		values.below(path+"{}", f)
	}
}

// checkExplain runs `kubectl explain` on the SidecarSet's own objects and
// checks that it prints, for each of their fields, the description the
// CRD gives it, and nowhere `<no description>`.
func checkExplain(t *testing.T, kubectl func(...string) string, crd *apiextensionsv1.CustomResourceDefinition) {
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, path := range []string{
		"spec",
		"spec.injectionStrategy",
		"spec.injectionStrategy.revision",
		"spec.updateStrategy",
		"spec.updateStrategy.priorityStrategy",
		"spec.patchPodMetadata",
		"spec.containers.upgradeStrategy",
		"spec.containers.resourcesPolicy",
		"spec.containers.transferEnv",
		"status",
		"status.injection",
		// The brief's examples, each alone.
		"spec.updateStrategy.maxUnavailable",
		"spec.updateStrategy.minReadySeconds",
	} {
		s := at(t, root, path)
		start := time.Now()
		out := kubectl("explain", "sidecarsets."+path)
		took := time.Since(start)
		if strings.Contains(out, "<no description>") {
			t.Errorf("kubectl explain sidecarsets.%s prints <no description>:\n%s", path, out)
		}
		want := map[string]string{path: s.Description}
		for name, p := range s.Properties {
			want[path+"."+name] = p.Description
		}
		if s.Items != nil && s.Items.Schema != nil {
			for name, p := range s.Items.Schema.Properties {
				want[path+"."+name] = p.Description
			}
		}
		flat := strings.Join(strings.Fields(out), " ")
		for field, desc := range want {
			if desc == "" {
				t.Errorf("the CRD has no description for %s", field)
				continue
			}
			if !strings.Contains(flat, strings.Join(strings.Fields(desc), " ")) {
				t.Errorf("kubectl explain sidecarsets.%s does not print the description of %s, %q:\n%s", path, field, desc, out)
			}
		}
		t.Logf("kubectl explain sidecarsets.%s: %d fields described, in %v", path, len(want), took.Round(time.Millisecond))
	}
}

// at returns the schema of the field at path (dot-separated, list items
// crossed as kubectl explain crosses them).
func at(t *testing.T, s *apiextensionsv1.JSONSchemaProps, path string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for name := range strings.SplitSeq(path, ".") {
		if s.Items != nil && s.Items.Schema != nil {
			s = s.Items.Schema
		}
		p, ok := s.Properties[name]
		if !ok {
			t.Fatalf("the CRD has no field %s", path)
		}
		s = &p
	}
	return *s
}
