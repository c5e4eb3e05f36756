package cli

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/validation"
)

// NewCmdConvert returns `convert -f FILE`.
func NewCmdConvert(o *Options) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "convert -f FILE|-",
		Short: "Turn OpenKruise SidecarSets into sidecarset.dev/v1alpha1 ones",
		Long: `Read OpenKruise SidecarSets (apps.kruise.io/v1alpha1 or v1beta1) and print them
as sidecarset.dev/v1alpha1 SidecarSets. No cluster is needed.

Fields with the same meaning keep their names. spec.namespace (v1alpha1),
namespaceSelector.namespaces and specificNamespace (v1beta1) become a
namespaceSelector on the kubernetes.io/metadata.name label. Every OpenKruise
field sidecarset does not support (hot upgrade, shareVolumePolicy, transferEnv,
patchPodMetadata, injectionStrategy.revision, scatterStrategy, priorityStrategy,
...) is dropped with a warning on stderr naming it; "Note:" lines name dropped
values that mean what sidecarset does anyway (upgradeType ColdUpgrade,
shareVolumePolicy disabled). Server-set metadata and status are dropped.
Documents that are not OpenKruise SidecarSets are printed as they came.

A converted SidecarSet that sidecarset's validation would refuse gets a warning
with the field and the reason.`,
		Example: `  # Convert the SidecarSets exported from a cluster running OpenKruise
  kubectl get sidecarsets.apps.kruise.io -o yaml | kubectl sidecarset convert -f - > sidecarsets.yaml

  # Convert a manifest file, checking the warnings
  kubectl sidecarset convert -f kruise/sidecarset.yaml 2>warnings.txt`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("-f is required: a file of OpenKruise SidecarSets, or - for standard input")
			}
			in, err := openInput(file, o.In)
			if err != nil {
				return err
			}
			defer in.Close()
			return Convert(in, o.Out, o.ErrOut, ConvertOptions{Source: "-f " + file, ManagerNamespace: o.ManagerNamespace})
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "File of OpenKruise SidecarSets, or - for standard input")
	return cmd
}

// ConvertOptions name the input and the installation validated against.
type ConvertOptions struct {
	Source           string
	ManagerNamespace string
}

// Convert prints the documents of in with OpenKruise SidecarSets converted,
// warnings on errOut.
func Convert(in io.Reader, out, errOut io.Writer, opts ConvertOptions) error {
	docs, err := readDocuments(in, opts.Source)
	if err != nil {
		return err
	}
	outDocs := make([][]byte, 0, len(docs))
	for _, d := range docs {
		converted, changed, err := convertDocument(d, errOut, opts)
		if err != nil {
			return fmt.Errorf("%s, %s: %w", opts.Source, d.describe(), err)
		}
		if !changed {
			outDocs = append(outDocs, d.raw)
			continue
		}
		b, err := marshal(converted)
		if err != nil {
			return err
		}
		outDocs = append(outDocs, b)
	}
	return writeDocuments(out, outDocs)
}

// convertDocument converts a Kruise SidecarSet, or each one in a List.
func convertDocument(d document, errOut io.Writer, opts ConvertOptions) (map[string]any, bool, error) {
	api, kind := d.kind()
	switch {
	case isKruise(api) && kind == "SidecarSet":
		return convertObject(d.obj, d.describe(), errOut, opts)
	case (api == "v1" && kind == "List") || (isKruise(api) && kind == "SidecarSetList"):
		items, _ := d.obj["items"].([]any)
		out := make([]any, 0, len(items))
		changed := false
		for i, it := range items {
			m, _ := it.(map[string]any)
			itemAPI, itemKind := document{obj: m}.kind()
			if !isKruise(itemAPI) || itemKind != "SidecarSet" {
				out = append(out, it)
				continue
			}
			c, _, err := convertObject(m, fmt.Sprintf("%s, item %d (%s)", d.describe(), i, document{obj: m, index: i}.describe()), errOut, opts)
			if err != nil {
				return nil, false, err
			}
			out = append(out, c)
			changed = true
		}
		if !changed {
			return nil, false, nil
		}
		return map[string]any{"apiVersion": "v1", "kind": "List", "items": out}, true, nil
	case isKruise(api):
		fmt.Fprintf(errOut, "Warning: %s: %s %s is not a SidecarSet; printed as it came\n", d.describe(), api, kind)
	}
	return nil, false, nil
}

func isKruise(apiVersion string) bool {
	return apiVersion == "apps.kruise.io/v1alpha1" || apiVersion == "apps.kruise.io/v1beta1"
}

// converter converts one SidecarSet and collects what it says about it.
type converter struct {
	what  string
	notes []string
}

// drop reports a field that is not carried over because sidecarset has no
// such behaviour.
func (c *converter) drop(path, why string) {
	c.notes = append(c.notes, fmt.Sprintf("Warning: %s: %s dropped: %s", c.what, path, why))
}

// same reports a field not carried over because its value is what
// sidecarset does anyway.
func (c *converter) same(path, why string) {
	c.notes = append(c.notes, fmt.Sprintf("Note: %s: %s dropped: %s", c.what, path, why))
}

// convertObject converts one Kruise SidecarSet.
func convertObject(obj map[string]any, what string, errOut io.Writer, opts ConvertOptions) (map[string]any, bool, error) {
	c := &converter{what: what}
	out := map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "SidecarSet",
		"metadata":   c.metadata(obj["metadata"]),
	}
	for _, k := range sortedKeys(obj) {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
		case "spec":
		default:
			c.drop(k, "not a SidecarSet field")
		}
	}
	spec, _ := obj["spec"].(map[string]any)
	converted, err := c.spec(spec)
	if err != nil {
		return nil, false, err
	}
	out["spec"] = converted

	set := &v1alpha1.SidecarSet{}
	// A field the conversion forgot would be caught here rather than
	// printed into a manifest the apiserver prunes.
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(out, set, true); err != nil {
		return nil, false, fmt.Errorf("converted SidecarSet does not decode: %w", err)
	}
	validation.Default(set)
	if errs := validation.ValidateCreate(set, nil, validation.Options{ManagerNamespace: opts.ManagerNamespace}); len(errs) > 0 {
		for _, e := range errs {
			c.notes = append(c.notes, fmt.Sprintf("Warning: %s: sidecarset's validation would refuse it: %s", what, e.Error()))
		}
	}
	for _, n := range c.notes {
		fmt.Fprintln(errOut, n)
	}
	return out, true, nil
}

// metadata keeps what a user wrote: name, labels, annotations.
func (c *converter) metadata(v any) map[string]any {
	meta, _ := v.(map[string]any)
	out := map[string]any{}
	for _, k := range []string{"name", "generateName", "labels", "annotations"} {
		if v, ok := meta[k]; ok {
			out[k] = v
		}
	}
	if _, ok := meta["finalizers"]; ok {
		c.drop("metadata.finalizers", "finalizers belong to the OpenKruise controller")
	}
	if _, ok := meta["ownerReferences"]; ok {
		c.drop("metadata.ownerReferences", "owners in the OpenKruise installation do not carry over")
	}
	return out
}

// specFields are the spec fields carried over as they are.
var specFields = []string{"selector", "volumes", "imagePullSecrets", "revisionHistoryLimit"}

func (c *converter) spec(spec map[string]any) (map[string]any, error) {
	out := map[string]any{}
	var names []string
	var nsSelector map[string]any
	for _, k := range sortedKeys(spec) {
		v := spec[k]
		switch {
		case slices.Contains(specFields, k):
			out[k] = v
		case k == "namespace": // v1alpha1
			if s, _ := v.(string); s != "" {
				names = append(names, s)
			}
		case k == "namespaceSelector": // v1alpha1: a LabelSelector, in some versions with namespaces inline
			sel, _ := v.(map[string]any)
			var ns []string
			nsSelector, ns = splitNamespaces(sel)
			names = append(names, ns...)
		case k == "specificNamespace": // v1beta1
			m, _ := v.(map[string]any)
			for _, sk := range sortedKeys(m) {
				switch sk {
				case "namespace":
					if s, _ := m[sk].(string); s != "" {
						names = append(names, s)
					}
				case "namespaceSelector":
					sel, _ := m[sk].(map[string]any)
					var ns []string
					nsSelector, ns = splitNamespaces(sel)
					names = append(names, ns...)
				default:
					c.drop("spec.specificNamespace."+sk, "unknown to sidecarset")
				}
			}
		case k == "containers" || k == "initContainers":
			list, err := c.containers(k, v)
			if err != nil {
				return nil, err
			}
			out[k] = list
		case k == "updateStrategy":
			if s := c.updateStrategy(v); len(s) > 0 {
				out[k] = s
			}
		case k == "injectionStrategy":
			if s := c.injectionStrategy(v); len(s) > 0 {
				out[k] = s
			}
		case k == "patchPodMetadata":
			c.drop("spec.patchPodMetadata", "sidecarset does not write pod annotations on behalf of a SidecarSet; set them in the workloads")
		case k == "customVersion":
			c.drop("spec.customVersion", "sidecarset names revisions by hash (see status.latestRevision); there is no custom version to inject by")
		default:
			c.drop("spec."+k, "unknown to sidecarset")
		}
	}
	sel, err := namespaceSelector(nsSelector, names)
	if err != nil {
		return nil, err
	}
	if sel != nil {
		out["namespaceSelector"] = sel
	}
	return out, nil
}

// splitNamespaces separates a Kruise namespace selector's list of names
// from its label selector.
func splitNamespaces(sel map[string]any) (map[string]any, []string) {
	if sel == nil {
		return nil, nil
	}
	rest := map[string]any{}
	var names []string
	for k, v := range sel {
		if k == "namespaces" {
			for _, n := range asSlice(v) {
				if s, ok := n.(string); ok && s != "" {
					names = append(names, s)
				}
			}
			continue
		}
		rest[k] = v
	}
	if len(rest) == 0 {
		rest = nil
	}
	return rest, names
}

// namespaceSelector builds ours from a label selector and namespace names:
// one name is a matchLabels entry on kubernetes.io/metadata.name, which the
// apiserver sets on every namespace; several are an In expression.
func namespaceSelector(sel map[string]any, names []string) (map[string]any, error) {
	if len(names) == 0 {
		return sel, nil
	}
	out := map[string]any{}
	for k, v := range sel {
		out[k] = v
	}
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	if len(names) == 1 {
		labels, _ := out["matchLabels"].(map[string]any)
		merged := map[string]any{}
		for k, v := range labels {
			merged[k] = v
		}
		if v, ok := merged[corev1.LabelMetadataName]; ok && v != names[0] {
			return nil, fmt.Errorf("spec.namespace %q and a namespaceSelector on %s=%v select no namespace together", names[0], corev1.LabelMetadataName, v)
		}
		merged[corev1.LabelMetadataName] = names[0]
		out["matchLabels"] = merged
		return out, nil
	}
	values := make([]any, len(names))
	for i, n := range names {
		values[i] = n
	}
	out["matchExpressions"] = append(asSlice(out["matchExpressions"]), map[string]any{
		"key": corev1.LabelMetadataName, "operator": "In", "values": values,
	})
	return out, nil
}

// containerFields are the JSON names of corev1.Container's fields, which a
// Kruise SidecarContainer inlines as ours does.
var containerFields = func() map[string]bool {
	fields := map[string]bool{}
	t := reflect.TypeFor[corev1.Container]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		fields[name] = true
	}
	return fields
}()

func (c *converter) containers(key string, v any) ([]any, error) {
	var out []any
	var names []string
	for i, item := range asSlice(v) {
		ctr, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.%s[%d]: not an object", key, i)
		}
		path := fmt.Sprintf("spec.%s[%d]", key, i)
		conv := map[string]any{}
		for _, k := range sortedKeys(ctr) {
			v := ctr[k]
			switch {
			case containerFields[k] || k == "podInjectPolicy":
				conv[k] = v
			case k == "upgradeStrategy":
				c.upgradeStrategy(path+".upgradeStrategy", v)
			case k == "shareVolumePolicy" || k == "shareVolumeDevicePolicy":
				c.sharePolicy(path+"."+k, v)
			case k == "transferEnv":
				c.drop(path+".transferEnv", "sidecarset does not copy environment variables from the pod's containers; declare them in env")
			case k == "resourcesPolicy":
				c.drop(path+".resourcesPolicy", "sidecarset does not size sidecars from the pod's containers; declare resources")
			default:
				c.drop(path+"."+k, "unknown to sidecarset")
			}
		}
		name, _ := ctr["name"].(string)
		names = append(names, name)
		if key == "initContainers" {
			if _, ok := ctr["podInjectPolicy"]; !ok {
				c.notes = append(c.notes, fmt.Sprintf("Warning: %s: %s (%s) has no podInjectPolicy: sidecarset puts it before the pod's own init containers (BeforeAppContainer, which a native sidecar wants), where OpenKruise appends init containers after them; set podInjectPolicy: AfterAppContainer to keep OpenKruise's placement", c.what, path, name))
			}
		}
		out = append(out, conv)
	}
	if key == "initContainers" && !slices.IsSorted(names) {
		c.notes = append(c.notes, fmt.Sprintf("Warning: %s: spec.initContainers: OpenKruise injects init containers sorted by name, sidecarset in the order declared (%s)", c.what, strings.Join(names, ", ")))
	}
	return out, nil
}

func (c *converter) upgradeStrategy(path string, v any) {
	m, _ := v.(map[string]any)
	for _, k := range sortedKeys(m) {
		switch val := m[k]; {
		case k == "upgradeType" && (val == "" || val == "ColdUpgrade"):
			c.same(path+".upgradeType", "ColdUpgrade (restart the sidecar with the new image) is how sidecarset updates in place")
		case k == "upgradeType":
			c.drop(path+".upgradeType", fmt.Sprintf("%v is not supported: sidecarset restarts the sidecar with the new image (ColdUpgrade)", val))
		case k == "hotUpgradeEmptyImage":
			c.drop(path+".hotUpgradeEmptyImage", "hot upgrade is not supported")
		default:
			c.drop(path+"."+k, "unknown to sidecarset")
		}
	}
}

func (c *converter) sharePolicy(path string, v any) {
	m, _ := v.(map[string]any)
	for _, k := range sortedKeys(m) {
		switch val, _ := m[k].(string); {
		case k == "type" && (val == "" || strings.EqualFold(val, "disabled")):
			c.same(path+".type", "disabled: sidecarset mounts only the volumes a sidecar declares")
		case k == "type":
			c.drop(path+".type", fmt.Sprintf("%s is not supported: sidecarset mounts only the volumes a sidecar declares; list the app's volumeMounts (and the volumes) in the sidecar", val))
		default:
			c.drop(path+"."+k, "unknown to sidecarset")
		}
	}
}

func (c *converter) updateStrategy(v any) map[string]any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for _, k := range sortedKeys(m) {
		switch k {
		case "type", "paused", "selector", "partition", "maxUnavailable":
			out[k] = m[k]
		case "scatterStrategy":
			if len(asSlice(m[k])) > 0 {
				c.drop("spec.updateStrategy.scatterStrategy", "sidecarset updates pods in namespace/name order, not-ready pods first")
			}
		case "priorityStrategy":
			c.drop("spec.updateStrategy.priorityStrategy", "sidecarset updates pods in namespace/name order, not-ready pods first")
		default:
			c.drop("spec.updateStrategy."+k, "unknown to sidecarset")
		}
	}
	return out
}

func (c *converter) injectionStrategy(v any) map[string]any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for _, k := range sortedKeys(m) {
		switch k {
		case "paused":
			out[k] = m[k]
		case "revision":
			c.drop("spec.injectionStrategy.revision", "sidecarset always injects the latest revision into new pods; roll out with updateStrategy.partition instead")
		default:
			c.drop("spec.injectionStrategy."+k, "unknown to sidecarset")
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
