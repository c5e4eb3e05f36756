package validation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// FuzzValidate decodes two SidecarSets from JSON, defaults the first and
// validates it against the second, as the webhooks do. It checks that nothing
// panics, that Default is idempotent, that validation modifies neither input,
// that every error names a field under metadata or spec, and that what
// ValidateCreate accepts the CRD's schema accepts too (`kubectl sidecarset
// inject` validates offline, where no schema checks first).
func FuzzValidate(f *testing.F) {
	schema := crdSchema(f)
	kruise, _ := json.Marshal(mysqlExporter())
	f.Add(kruise, []byte(`{"metadata":{"name":"other"},"spec":{"selector":{"matchLabels":{"example.com/mysql":"true"}},
		"containers":[{"name":"exporter","image":"busybox"}],"volumes":[{"name":"v"}]}}`))
	f.Add([]byte(`{"metadata":{"name":"log","annotations":{"sidecarset.dev/allow-system-namespaces":"true"}},
		"spec":{"selector":{"matchExpressions":[{"key":"app","operator":"In","values":["a","b"]}]},
		"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kube-system"}},
		"initContainers":[{"name":"log-shipper","image":"fluent-bit:3.1","restartPolicy":"Always",
			"readinessProbe":{"httpGet":{"port":"http"}},"lifecycle":{"preStop":{"sleep":{"seconds":5}}},
			"resources":{"limits":{"cpu":"100m","memory":"64Mi"}},
			"env":[{"name":"NODE","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}}]}],
		"volumes":[{"name":"cfg","configMap":{"name":"c"}},{"name":"tok","projected":{"sources":[{"serviceAccountToken":{"path":"t"}}]}}],
		"updateStrategy":{"partition":"50%","maxUnavailable":"0%","selector":{"matchLabels":{"canary":"true"}}}}}`),
		[]byte(`{}`))
	f.Add([]byte(`{"spec":{"selector":{},"containers":[{"name":"","image":" x ","ports":[{"containerPort":-1,"name":"a_b"}],
		"livenessProbe":{"exec":{},"tcpSocket":{"port":0}},"env":[{"name":"=","value":"v","valueFrom":{}}],"envFrom":[{}]}],
		"updateStrategy":{"partition":"x","maxUnavailable":-3,"progressDeadlineSeconds":0},"revisionHistoryLimit":-1}}`),
		[]byte(`{"metadata":{"name":"b"},"spec":{"selector":{"matchExpressions":[{"key":"k","operator":"Bogus"}]}}}`))

	f.Fuzz(func(t *testing.T, setJSON, otherJSON []byte) {
		var set, other v1alpha1.SidecarSet
		if json.Unmarshal(setJSON, &set) != nil || json.Unmarshal(otherJSON, &other) != nil {
			return
		}
		Default(&set)
		once := set.DeepCopy()
		Default(&set)
		if !apiequality.Semantic.DeepEqual(once, &set) {
			t.Fatalf("Default is not idempotent:\nonce:  %+v\ntwice: %+v", once, &set)
		}

		otherBefore := other.DeepCopy()
		opts := Options{ManagerNamespace: "sidecarset-system"}
		errs := ValidateCreate(&set, []*v1alpha1.SidecarSet{&other}, opts)
		errs = append(errs, ValidateUpdate(&other, &set, []*v1alpha1.SidecarSet{&other}, opts)...)
		if !apiequality.Semantic.DeepEqual(once, &set) || !apiequality.Semantic.DeepEqual(otherBefore, &other) {
			t.Fatal("validation modified its input")
		}
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "metadata.") && !strings.HasPrefix(e.Field, "spec.") {
				t.Errorf("error without a field path under metadata or spec: %v", e)
			}
		}
		if len(ValidateCreate(&set, nil, opts)) == 0 {
			checkSchemaAccepts(t, schema, &set)
		}
	})
}

// crdSchema returns a validator of the CRD's schema, as the apiserver
// builds it.
func crdSchema(tb testing.TB) apiservervalidation.SchemaCreateValidator {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "sidecarset.dev_sidecarsets.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		tb.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != v1alpha1.GroupVersion.Version {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			tb.Fatal(err)
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(&internal)
		if err != nil {
			tb.Fatal(err)
		}
		return validator
	}
	tb.Fatalf("the CRD has no version %s", v1alpha1.GroupVersion.Version)
	return nil
}

// checkSchemaAccepts fails when the CRD's schema refuses set's metadata or
// spec. The status is left out: a create never stores it.
func checkSchemaAccepts(t *testing.T, schema apiservervalidation.SchemaCreateValidator, set *v1alpha1.SidecarSet) {
	t.Helper()
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	delete(obj, "status")
	if errs := apiservervalidation.ValidateCustomResource(nil, obj, schema); len(errs) > 0 {
		t.Fatalf("validation accepts what the CRD schema refuses: %v\n%s", errs.ToAggregate(), b)
	}
}
