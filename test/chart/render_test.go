// Package chart tests charts/sidecarset by rendering it with Helm's own
// engine (as `helm template` does) and comparing what it renders with
// config/, the manifests the manager's code and tests are built against.
package chart

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

const (
	chartDir  = "../../charts/sidecarset"
	configDir = "../../config"
	// repoRoot is where the manager is built from.
	repoRoot    = "../.."
	releaseName = "sidecarset"
	// kubeVersion is what the render claims to target: the version of the
	// Kubernetes libraries the manager is built with.
	kubeVersion = "v1.37.2"
)

// decoder decodes manifests strictly: an unknown or duplicated field is an
// error, as `kubectl apply --validate=strict` would report it.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, monitoringv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// objects are decoded manifests keyed by "Kind namespace/name" (no
// namespace for cluster-scoped ones).
type objects map[string]runtime.Object

// rendered is one render of the chart.
type rendered struct {
	namespace string
	objects   objects
	notes     string
}

func key(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

// keys lists the objects, sorted, for comparing with what a case expects.
func (objs objects) keys() []string {
	return slices.Sorted(maps.Keys(objs))
}

// get returns the object under key as a T, failing the test when it is
// missing or of another type.
func get[T runtime.Object](t *testing.T, objs objects, kind, namespace, name string) T {
	t.Helper()
	k := key(kind, namespace, name)
	obj, ok := objs[k]
	if !ok {
		t.Fatalf("no %s among %v", k, objs.keys())
	}
	typed, ok := obj.(T)
	if !ok {
		t.Fatalf("%s decoded as %T", k, obj)
	}
	return typed
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load %s: %v", chartDir, err)
	}
	return ch
}

// install renders the chart as `helm template --namespace namespace -f
// values` does: the values read as -f reads them and checked against
// values.schema.json, the chart's kubeVersion checked, then Helm's template
// engine. (Helm's install action would do the same but pulls in the whole
// client, registries and storage drivers, and doubles the cold build.)
func install(t *testing.T, namespace, values string) (manifest, notes string, err error) {
	t.Helper()
	ch := loadChart(t)
	vals, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("values %q: %v", values, err)
	}
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	if c := ch.Metadata.KubeVersion; c != "" && !chartutil.IsCompatibleRange(c, kv.String()) {
		t.Fatalf("the chart requires kubeVersion %s, which excludes %s", c, kv)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	opts := chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, false)
	if err != nil {
		return "", "", err
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return "", "", err
	}
	for name, content := range files {
		if filepath.Base(name) == "NOTES.txt" {
			notes = content
			delete(files, name)
		}
	}
	// As Helm's install action assembles its manifest.
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return "", "", err
	}
	if len(hooks) > 0 {
		t.Fatalf("the chart renders %d hooks, which this test does not check", len(hooks))
	}
	var b strings.Builder
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return b.String(), notes, nil
}

// render renders the chart and decodes every document strictly.
func render(t *testing.T, namespace, values string) rendered {
	t.Helper()
	manifest, notes, err := install(t, namespace, values)
	if err != nil {
		t.Fatalf("render the chart in %s with values %q: %v", namespace, values, err)
	}
	return rendered{namespace: namespace, objects: decodeAll(t, manifest), notes: notes}
}

// readConfig decodes every document of a file under config/.
func readConfig(t *testing.T, name string) objects {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(configDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, string(data))
}

// decodeAll decodes every document of a manifest strictly, refusing two
// objects of the same kind and name.
func decodeAll(t *testing.T, manifest string) objects {
	t.Helper()
	objs := objects{}
	for _, doc := range releaseutil.SplitManifests(manifest) {
		obj, gvk := decode(t, []byte(doc))
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		k := key(gvk.Kind, m.GetNamespace(), m.GetName())
		if _, dup := objs[k]; dup {
			t.Fatalf("%s appears twice", k)
		}
		objs[k] = obj
	}
	if len(objs) == 0 {
		t.Fatalf("no manifest in:\n%s", manifest)
	}
	return objs
}

// decode decodes one manifest strictly with the Kubernetes scheme.
func decode(t *testing.T, doc []byte) (runtime.Object, *schema.GroupVersionKind) {
	t.Helper()
	obj, gvk, err := decoder.Decode(doc, nil, nil)
	if err != nil {
		t.Fatalf("decode:\n%s\n%v", doc, err)
	}
	return obj, gvk
}
