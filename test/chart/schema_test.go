package chart

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// update rewrites the generated definitions of values.schema.json:
// go test -run TestSchemaKubernetesValues -update
var update = flag.Bool("update", false, "rewrite the definitions section of values.schema.json from the Kubernetes API types")

var schemaPath = filepath.Join(chartDir, "values.schema.json")

// schemaError is how Helm begins its message when values fail the schema.
const schemaError = "values don't meet the specifications of the schema"

// TestSchema checks that values.schema.json refuses values the apiserver
// would refuse halfway through an install, and keys the chart does not
// know at any level: a misspelt key would otherwise leave its default in
// place without a word.
func TestSchema(t *testing.T) {
	for _, tc := range []struct {
		values string
		// want is in the error, naming what is wrong.
		want string
	}{
		{"webhook: {failurePolicy: ignore}", "failurePolicy"},
		{"webhook: {timeoutSeconds: 31}", "timeoutSeconds"},
		{"webhook: {excludeNamespaces: ['']}", "excludeNamespaces"},
		{"replicas: 0", "replicas"},
		{"injection: Policy", "injection"},
		{"patchPodMetadata: {allowedKeys: example.com/}", "allowedKeys"},
		{"patchPodMetadata: {allowedKeys: ['example.com/a,example.com/b']}", "allowedKeys"},
		{"patchPodMetadata: {allowedKeys: ['example.com/*-level']}", "allowedKeys"},
		{"patchPodMetadata: {allowedKey: [example.com/]}", "allowedKey"},
		// Unknown keys, from the top down.
		{"replica: 3", "replica"},
		{"webhook: {failurepolicy: Ignore}", "failurepolicy"},
		{"image: {tags: v1}", "tags"},
		{"podDisruptionBudget: {minAvailble: 1}", "minAvailble"},
		{"metrics: {service: {enable: true}}", "enable"},
		{"admissionPolicy: {binding: 'no'}", "binding"},
		{"admissionPolicy: {bindings: false}", "bindings"},
		{"metrics: {serviceMonitor: {enable: true}}", "enable"},
		{"metrics: {serviceMonitor: {interval: 30}}", "interval"},
		{"metrics: {serviceMonitor: {interval: 30sec}}", "interval"},
		{"metrics: {serviceMonitor: {labels: {release: [prometheus]}}}", "release"},
		{"metrics: {prometheusRule: {enable: true}}", "enable"},
		{"metrics: {dashboard: {label: {grafana_dashboard: '1'}}}", "label"},
		{"metrics: {dashboard: {labels: {grafana_dashboard: 1}}}", "grafana_dashboard"},
		// Kubernetes objects handed to the pod: their own fields only.
		{"resources: {request: {cpu: 1}}", "request"},
		{"resources: {limits: {memory: [1Gi]}}", "memory"},
		{"securityContext: {readOnlyRootFileSystem: true}", "readOnlyRootFileSystem"},
		{"securityContext: {capabilities: {dorp: [ALL]}}", "dorp"},
		{"podSecurityContext: {runAsNonroot: true}", "runAsNonroot"},
		{"podSecurityContext: {seccompProfile: {typ: RuntimeDefault}}", "typ"},
		{"imagePullSecrets: [{nam: registry}]", "nam"},
		{"tolerations: [{keys: dedicated}]", "keys"},
		{"affinity: {podAntiAfinity: {}}", "podAntiAfinity"},
		{"affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpression: []}]}}}", "matchExpression"},
		{"nodeSelector: {disk: {type: ssd}}", "nodeSelector"},
		{"logLevel: verbose", "logLevel"},
		{"containerPorts: {webhook: 0}", "webhook"},
		{"containerPorts: {admin: 9000}", "admin"},
		{"extraArgs: [workers=8]", "extraArgs"},
		{"podLabels: {team: [a]}", "podLabels"},
		{"topologySpreadConstraints: [{maxSkew: 1, topologykey: zone}]", "topologykey"},
	} {
		_, _, err := install(t, configNamespace, tc.values)
		if err == nil || !strings.Contains(err.Error(), schemaError) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %q: err = %v, want a schema error naming %s", tc.values, err, tc.want)
		}
	}
}

// TestSchemaAccepts checks that the schema takes what values.yaml documents
// and what Kubernetes users write for the objects handed to the pod.
func TestSchemaAccepts(t *testing.T) {
	for _, values := range []string{
		"",
		"resources: {requests: {cpu: 1, memory: 128Mi}, limits: {memory: 256Mi}}",
		"podDisruptionBudget: {minAvailable: 50%}",
		"tolerations: [{key: dedicated, operator: Equal, value: infra, effect: NoSchedule, tolerationSeconds: 60}]",
		"nodeSelector: {kubernetes.io/os: linux}",
		"imagePullSecrets: [{name: registry}]",
		"priorityClassName: system-cluster-critical",
		"logLevel: '4'",
		"extraArgs: [--workers=8, --narrow-pod-webhook=false]",
		"podAnnotations: {example.com/owner: platform}",
		"injection: policy",
		"injection: auto",
		"patchPodMetadata: {allowedKeys: ['*']}",
		"patchPodMetadata: {allowedKeys: [example.com/, 'example.com/log-*', prometheus.io/scrape]}",
		"metrics: {serviceMonitor: {enabled: true, interval: 1m30s, labels: {release: prometheus}}}",
		"metrics: {serviceMonitor: {enabled: true, interval: ''}}",
		`affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector: {matchLabels: {app.kubernetes.io/name: sidecarset}}`,
		"podSecurityContext: {runAsNonRoot: true, fsGroup: 65532, seccompProfile: {type: RuntimeDefault}}",
		// As an umbrella chart's subchart.
		"global: {imageRegistry: registry.example.com}",
	} {
		if _, _, err := install(t, configNamespace, values); err != nil {
			t.Errorf("values %q: %v", values, err)
		}
	}
}

// openValues are the objects of values.schema.json that take any key, and
// why.
var openValues = map[string]string{
	"values.global": "an umbrella chart's globals: Helm hands them to every subchart, and their keys are the umbrella chart's",
}

// TestSchemaClosed walks values.schema.json: every object in it lists its
// keys and refuses others (additionalProperties false), or is a map whose
// values have a schema of their own, or is one of openValues.
func TestSchemaClosed(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(readSchema(t), &schema); err != nil {
		t.Fatalf("%s: %v", schemaPath, err)
	}
	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		if ref, ok := node["$ref"].(string); ok {
			if !strings.HasPrefix(ref, "#/definitions/") {
				t.Errorf("%s: $ref %q outside #/definitions", path, ref)
			}
			return
		}
		types := node["type"]
		isObject := types == "object" || node["properties"] != nil
		if list, ok := types.([]any); ok {
			isObject = slices.Contains(list, any("object"))
		}
		if _, open := openValues[path]; open {
			if !isObject || node["additionalProperties"] != nil {
				t.Errorf("%s: listed as open, but is not an object that takes any key", path)
			}
			return
		}
		if isObject {
			switch extra := node["additionalProperties"].(type) {
			case bool:
				if extra {
					t.Errorf("%s: additionalProperties true", path)
				}
			case map[string]any:
				walk(path+".*", extra)
			default:
				t.Errorf("%s: an object that takes any key (set additionalProperties)", path)
			}
		}
		props, _ := node["properties"].(map[string]any)
		for name, p := range props {
			walk(path+"."+name, p.(map[string]any))
		}
		if items, ok := node["items"].(map[string]any); ok {
			walk(path+"[]", items)
		}
	}
	walk("values", schema)
	defs, _ := schema["definitions"].(map[string]any)
	for name, d := range defs {
		walk("definitions."+name, d.(map[string]any))
	}
}

// kubernetesValues are the values that the chart hands to the manager's pod
// as they are, and the Kubernetes API type each one is.
var kubernetesValues = map[string]reflect.Type{
	"imagePullSecrets":          reflect.TypeFor[[]corev1.LocalObjectReference](),
	"resources":                 reflect.TypeFor[corev1.ResourceRequirements](),
	"nodeSelector":              reflect.TypeFor[map[string]string](),
	"tolerations":               reflect.TypeFor[[]corev1.Toleration](),
	"topologySpreadConstraints": reflect.TypeFor[[]corev1.TopologySpreadConstraint](),
	"affinity":                  reflect.TypeFor[corev1.Affinity](),
	"podSecurityContext":        reflect.TypeFor[corev1.PodSecurityContext](),
	"securityContext":           reflect.TypeFor[corev1.SecurityContext](),
}

// TestSchemaKubernetesValues checks that each value handed to the pod is
// described by its Kubernetes API type, field by field at every level, so
// that the schema follows the API the manager is built with.
func TestSchemaKubernetesValues(t *testing.T) {
	g := &schemaGen{defs: map[string]any{}, pkgs: map[string]string{}}
	wantProps := map[string]any{}
	for name, typ := range kubernetesValues {
		wantProps[name] = g.of(typ)
	}
	if *update {
		writeDefinitions(t, g.defs)
	}
	var schema struct {
		Properties  map[string]any `json:"properties"`
		Definitions map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(readSchema(t), &schema); err != nil {
		t.Fatalf("%s: %v", schemaPath, err)
	}
	gotProps := map[string]any{}
	for name := range kubernetesValues {
		gotProps[name] = schema.Properties[name]
	}
	if diff := cmp.Diff(roundTrip(t, wantProps), gotProps); diff != "" {
		t.Errorf("values.schema.json properties (-from the API types +file):\n%s", diff)
	}
	if diff := cmp.Diff(roundTrip(t, g.defs), schema.Definitions); diff != "" {
		t.Errorf("values.schema.json definitions (-from the API types +file; go test -run %s -update rewrites them):\n%s", t.Name(), diff)
	}
}

func readSchema(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// roundTrip returns v as encoding/json reads it back, to compare with the
// file's contents.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// definitionsKey starts the generated part of values.schema.json, which
// runs to the end of the file.
const definitionsKey = "\n  \"definitions\": "

// writeDefinitions replaces the definitions section, the last of the
// file, with defs.
func writeDefinitions(t *testing.T, defs map[string]any) {
	t.Helper()
	data := readSchema(t)
	i := bytes.Index(data, []byte(definitionsKey))
	if i < 0 {
		t.Fatalf("%s has no line beginning %q to replace from", schemaPath, strings.TrimSpace(definitionsKey))
	}
	generated, err := json.MarshalIndent(defs, "  ", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out := slices.Concat(data[:i], []byte(definitionsKey), generated, []byte("\n}\n"))
	if err := os.WriteFile(schemaPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// schemaGen writes the JSON schema of Kubernetes API types as a values file
// carries them: each struct a definition of its own that refuses other
// keys, named after the Go type.
type schemaGen struct {
	defs map[string]any
	// pkgs holds the package of each definition, to refuse two types of
	// one name.
	pkgs map[string]string
}

func (g *schemaGen) of(t reflect.Type) map[string]any {
	switch t {
	case reflect.TypeFor[resource.Quantity]():
		// 100m, 128Mi, or a bare number.
		return map[string]any{"type": []string{"string", "number"}}
	case reflect.TypeFor[intstr.IntOrString]():
		return map[string]any{"type": []string{"integer", "string"}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.of(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.of(t.Elem())}
	case reflect.Struct:
		name := t.Name()
		if pkg, seen := g.pkgs[name]; seen {
			if pkg != t.PkgPath() {
				panic(fmt.Sprintf("two API types named %s: in %s and %s", name, pkg, t.PkgPath()))
			}
		} else {
			g.pkgs[name] = t.PkgPath()
			props := map[string]any{}
			for f := range t.Fields() {
				field, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if !f.IsExported() || field == "-" {
					continue
				}
				if field == "" || f.Anonymous {
					panic(fmt.Sprintf("%s.%s: an embedded or untagged field, which this schema does not describe", name, f.Name))
				}
				props[field] = g.of(f.Type)
			}
			g.defs[name] = map[string]any{"type": "object", "additionalProperties": false, "properties": props}
		}
		return map[string]any{"$ref": "#/definitions/" + name}
	default:
		panic(fmt.Sprintf("%s: no schema for kind %s", t, t.Kind()))
	}
}
