package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

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

Fields with the same meaning keep their names. spec.namespace (v1alpha1)
becomes a namespaceSelector on the kubernetes.io/metadata.name label. Every
OpenKruise field sidecarset does not support is dropped with a warning on
stderr naming it, and so is a field OpenKruise's API does not have; "Note:"
lines name dropped values that mean what sidecarset does anyway (upgradeType
ColdUpgrade, a shareVolumePolicy other than enabled). shareVolumePolicy,
shareVolumeDevicePolicy, transferEnv, resourcesPolicy, upgradeStrategy
HotUpgrade with its hotUpgradeEmptyImage (a warning says that the running pods
OpenKruise injected for a hot upgrade are not adopted), patchPodMetadata,
injectionStrategy.revision, the custom version (v1alpha1's label
apps.kruise.io/sidecarset-custom-version, v1beta1's spec.customVersion, both
becoming spec.customVersion) and canary SidecarSets
(apps.kruise.io/sidecarset-canary and -base) carry over; the keys
patchPodMetadata writes must be allowed on the manager
(--patch-pod-metadata-allowed-keys), which a warning says. A percentage partition
that counts differently here gets a warning with the difference. Server-set
metadata, OpenKruise's hash annotations and status are dropped.

Each converted SidecarSet gets adoptionPolicy SameName, so that it takes over
the running pods OpenKruise injected without restarting them. The steps of the
migration (what to do with the OpenKruise SidecarSet, and when) follow on
stderr. Documents that are not OpenKruise SidecarSets are printed as they came.

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
	return exits(cmd, map[int]string{
		0: "the SidecarSets are printed converted",
		1: "an input cannot be read or converted, or another error",
	})
}

// ConvertOptions name the input and the installation validated against.
type ConvertOptions struct {
	Source           string
	ManagerNamespace string
}

// Convert prints the documents of in with OpenKruise SidecarSets converted;
// warnings, and the migration steps for the converted sets, go to errOut.
func Convert(in io.Reader, out, errOut io.Writer, opts ConvertOptions) error {
	docs, err := readDocuments(in, opts.Source)
	if err != nil {
		return err
	}
	r := &convertRun{errOut: errOut, opts: opts}
	outDocs := make([][]byte, 0, len(docs))
	for _, d := range docs {
		converted, changed, err := r.document(d)
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
	if err := writeDocuments(out, outDocs); err != nil {
		return err
	}
	if len(r.converted) > 0 {
		fmt.Fprint(errOut, migrationSteps(r.converted))
	}
	return nil
}

// migrationSteps tells how to hand the named sets over from OpenKruise, in
// the order docs/migrating-from-openkruise.md gives.
//
// Why this order: OpenKruise's in-place updates stop first, so that two
// controllers never write the same container. The converted set is created
// while OpenKruise still injects, so that no new pod is created with no
// sidecar at all; such a pod is safe, as the webhooks never both inject it:
// the apiserver calls mutating webhooks in the order of their
// configurations' names, OpenKruise's kruise-mutating-webhook-configuration
// before sidecarset-mutating, and sidecarset skips a set whose container name
// the pod already has, then adopts the pod. Only then does OpenKruise stop
// injecting, and its set is deleted last, once nothing depends on it.
func migrationSteps(names []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nTo migrate from OpenKruise (docs/migrating-from-openkruise.md), for each SidecarSet (%s):\n", strings.Join(names, ", "))
	name := "NAME"
	if len(names) == 1 {
		name = names[0]
	}
	fmt.Fprintf(&b, `  1. Stop OpenKruise's in-place updates (it keeps injecting new pods):
       kubectl patch sidecarsets.apps.kruise.io %[1]s --type merge -p '{"spec":{"updateStrategy":{"paused":true}}}'
  2. Create the converted SidecarSet:
       kubectl apply -f sidecarsets.yaml
     With adoptionPolicy SameName it adopts the running pods OpenKruise injected
     (their sidecar carries IS_INJECTED=true, the pod kruise.io/sidecarset-hash):
     it writes its records into them and restarts nothing. Wait until
       kubectl sidecarset status %[1]s
     counts them matched and none unmanaged. A pod whose sidecar differs from the
     declared one by more than what OpenKruise adds stays unmanaged.
  3. Stop OpenKruise's injection; from now on sidecarset injects new pods:
       kubectl patch sidecarsets.apps.kruise.io %[1]s --type merge -p '{"spec":{"injectionStrategy":{"paused":true}}}'
  4. Delete the OpenKruise SidecarSet; the pods keep running as they are:
       kubectl delete sidecarsets.apps.kruise.io %[1]s
Until step 3 both webhooks see new pods, but never both inject one: the apiserver
calls mutating webhooks in the order of their configurations' names, OpenKruise's
(kruise-mutating-webhook-configuration) first, and sidecarset skips a pod that
already has a container of its sidecar's name (counted in skippedPods), then
adopts it.
`, name)
	return b.String()
}

// convertRun converts the documents of one input and remembers the names of
// the sets it converted.
type convertRun struct {
	errOut    io.Writer
	opts      ConvertOptions
	converted []string
}

// document converts a Kruise SidecarSet, or each one in a List.
func (r *convertRun) document(d document) (map[string]any, bool, error) {
	api, kind := d.kind()
	switch {
	case isKruise(api) && kind == "SidecarSet":
		return r.object(d.obj, d.describe())
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
			c, _, err := r.object(m, fmt.Sprintf("%s, item %d (%s)", d.describe(), i, document{obj: m, index: i}.describe()))
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
		fmt.Fprintf(r.errOut, "Warning: %s: %s %s is not a SidecarSet; printed as it came\n", d.describe(), api, kind)
	}
	return nil, false, nil
}

const (
	kruiseV1alpha1 = "apps.kruise.io/v1alpha1"
	kruiseV1beta1  = "apps.kruise.io/v1beta1"
)

func isKruise(apiVersion string) bool {
	return apiVersion == kruiseV1alpha1 || apiVersion == kruiseV1beta1
}

// converter converts one SidecarSet and collects what it says about it.
type converter struct {
	what string
	// apiVersion is the Kruise version the object is written in: the two
	// differ in a few spec fields.
	apiVersion string
	notes      []string
	// canaryOf is the base the converted set is a canary of, or "".
	canaryOf string
	// customVersion is OpenKruise's custom version of the set (v1alpha1's
	// label, v1beta1's spec.customVersion), nil when there is none.
	customVersion any
}

// drop reports a field that is not carried over because sidecarset has no
// such behaviour.
func (c *converter) drop(path, why string) {
	c.warn("%s dropped: %s", path, why)
}

// unknown reports a field that OpenKruise's SidecarSet does not have.
func (c *converter) unknown(path string) {
	c.warn("%s dropped: not a field of OpenKruise's %s SidecarSet", path, c.apiVersion)
}

// same reports a field not carried over because its value is what
// sidecarset does anyway.
func (c *converter) same(path, why string) {
	c.notes = append(c.notes, fmt.Sprintf("Note: %s: %s dropped: %s", c.what, path, why))
}

func (c *converter) warn(format string, args ...any) {
	c.notes = append(c.notes, fmt.Sprintf("Warning: %s: ", c.what)+fmt.Sprintf(format, args...))
}

// object converts one Kruise SidecarSet.
func (r *convertRun) object(obj map[string]any, what string) (map[string]any, bool, error) {
	api, _ := obj["apiVersion"].(string)
	c := &converter{what: what, apiVersion: api}
	out := map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "SidecarSet",
		"metadata":   c.metadata(obj["metadata"]),
	}
	for _, k := range sortedKeys(obj) {
		switch k {
		case "apiVersion", "kind", "metadata", "status", "spec":
		default:
			c.unknown(k)
		}
	}
	spec, _ := obj["spec"].(map[string]any)
	converted, err := c.spec(spec)
	if err != nil {
		return nil, false, err
	}
	converted["adoptionPolicy"] = string(v1alpha1.AdoptSameName)
	c.notes = append(c.notes, fmt.Sprintf("Note: %s: adoptionPolicy SameName added: the running pods OpenKruise injected are taken over without a restart", what))
	out["spec"] = converted

	set := &v1alpha1.SidecarSet{}
	// A field the conversion forgot would be caught here rather than
	// printed into a manifest the apiserver prunes.
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(out, set, true); err != nil {
		return nil, false, fmt.Errorf("converted SidecarSet does not decode: %w", err)
	}
	validation.Default(set)
	// The allowed annotation keys are the manager's; patchPodMetadata
	// warned about them already.
	checked := set
	if c.canaryOf != "" {
		// A canary is checked against its base, which may be in another
		// file or already in the cluster: the apiserver's webhook checks
		// the pair when it is applied.
		checked = set.DeepCopy()
		delete(checked.Annotations, v1alpha1.AnnotationCanary)
		delete(checked.Annotations, v1alpha1.AnnotationCanaryOf)
	}
	if errs := validation.ValidateCreate(checked, nil, validation.Options{ManagerNamespace: r.opts.ManagerNamespace, AnyAnnotationKey: true}); len(errs) > 0 {
		for _, e := range errs {
			c.warn("sidecarset's validation would refuse it: %s", e.Error())
		}
	}
	for _, n := range c.notes {
		fmt.Fprintln(r.errOut, n)
	}
	r.converted = append(r.converted, set.Name)
	return out, true, nil
}

// Annotations and labels OpenKruise reads or writes on a SidecarSet.
const (
	// Set by OpenKruise's SidecarSet webhook on every write: hashes of the
	// spec, meaningless to sidecarset (it keeps its own in status).
	kruiseHashAnnotation             = "kruise.io/sidecarset-hash"
	kruiseHashWithoutImageAnnotation = "kruise.io/sidecarset-hash-without-image"
	// Set by kubectl apply: the last applied OpenKruise object, which
	// would mislead kubectl's next three-way merge of the converted one.
	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
	// A canary SidecarSet names its base set; OpenKruise then injects only
	// the canary into pods both match.
	kruiseCanaryAnnotation = "apps.kruise.io/sidecarset-canary"
	kruiseBaseAnnotation   = "apps.kruise.io/sidecarset-base"
	// v1alpha1's spelling of spec.customVersion.
	kruiseCustomVersionLabel = "apps.kruise.io/sidecarset-custom-version"
	// With a hot-upgrade slot's container name, the pod annotation
	// OpenKruise gives the slot's SIDECARSET_VERSION from.
	kruiseHotVersionPrefix = "version.sidecarset.kruise.io/"
)

// canary turns OpenKruise's canary annotations into sidecarset's, in
// place. OpenKruise reads a canary only with both (canary "true" and a
// base); either alone means nothing there, and is dropped.
func (c *converter) canary(annotations map[string]any) {
	canary, hasCanary := annotations[kruiseCanaryAnnotation]
	base, hasBase := annotations[kruiseBaseAnnotation]
	delete(annotations, kruiseCanaryAnnotation)
	delete(annotations, kruiseBaseAnnotation)
	if baseName, _ := base.(string); canary == "true" && baseName != "" {
		annotations[v1alpha1.AnnotationCanary] = "true"
		annotations[v1alpha1.AnnotationCanaryOf] = baseName
		c.canaryOf = baseName
		c.warn("metadata.annotations[%s] and [%s] carried over as %s and %s: sidecarset also requires the canary to declare the same container names as %s and to select only pods it selects, and rolls the canary's own pods out by its updateStrategy (OpenKruise allows only NotUpdate)",
			kruiseCanaryAnnotation, kruiseBaseAnnotation, v1alpha1.AnnotationCanary, v1alpha1.AnnotationCanaryOf, baseName)
		return
	}
	for _, a := range []struct {
		key string
		has bool
	}{{kruiseCanaryAnnotation, hasCanary}, {kruiseBaseAnnotation, hasBase}} {
		if k := a.key; a.has {
			c.same("metadata.annotations["+k+"]", fmt.Sprintf("OpenKruise makes a canary only of %s \"true\" together with a non-empty %s", kruiseCanaryAnnotation, kruiseBaseAnnotation))
		}
	}
}

// metadata keeps what a user wrote: name, labels, annotations, without
// what belongs to the OpenKruise installation.
func (c *converter) metadata(v any) map[string]any {
	meta, _ := v.(map[string]any)
	out := map[string]any{}
	for _, k := range []string{"name", "generateName"} {
		if v, ok := meta[k]; ok {
			out[k] = v
		}
	}
	if labels, _ := meta["labels"].(map[string]any); len(labels) > 0 {
		labels = maps.Clone(labels)
		if v, ok := labels[kruiseCustomVersionLabel]; ok {
			delete(labels, kruiseCustomVersionLabel)
			if c.apiVersion == kruiseV1alpha1 {
				c.customVersion = v
			} else {
				c.same("metadata.labels["+kruiseCustomVersionLabel+"]", "OpenKruise's v1beta1 API reads the custom version from spec.customVersion")
			}
		}
		if len(labels) > 0 {
			out["labels"] = labels
		}
	}
	if annotations, _ := meta["annotations"].(map[string]any); len(annotations) > 0 {
		annotations = maps.Clone(annotations)
		for _, k := range []string{kruiseHashAnnotation, kruiseHashWithoutImageAnnotation, lastAppliedAnnotation} {
			delete(annotations, k)
		}
		c.canary(annotations)
		if len(annotations) > 0 {
			out["annotations"] = annotations
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

// specFields are the spec fields carried over as they are, in both
// versions of OpenKruise's SidecarSet.
var specFields = []string{"selector", "volumes", "imagePullSecrets", "revisionHistoryLimit"}

func (c *converter) spec(spec map[string]any) (map[string]any, error) {
	out := map[string]any{}
	var namespace string
	var nsSelector map[string]any
	for _, k := range sortedKeys(spec) {
		v := spec[k]
		switch {
		case slices.Contains(specFields, k):
			out[k] = v
		case k == "namespace" && c.apiVersion == kruiseV1alpha1:
			namespace, _ = v.(string)
		case k == "namespaceSelector":
			nsSelector = c.labelSelector("spec.namespaceSelector", v)
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
			if p := c.patchPodMetadata(v); len(p) > 0 {
				out[k] = p
			}
		case k == "customVersion" && c.apiVersion == kruiseV1beta1:
			c.customVersion = v
		default:
			c.unknown("spec." + k)
		}
	}
	if c.customVersion != nil {
		out["customVersion"] = c.customVersion
		c.notes = append(c.notes, fmt.Sprintf("Note: %s: the custom version %v carried over as spec.customVersion: it labels sidecarset's revisions from the converted spec on (%s); OpenKruise's older revisions do not carry over", c.what, c.customVersion, v1alpha1.LabelCustomVersion))
	}
	sel, err := namespaceSelector(nsSelector, namespace)
	if err != nil {
		return nil, err
	}
	if sel != nil {
		out["namespaceSelector"] = sel
	}
	if strategy, _ := out["updateStrategy"].(map[string]any); strategy != nil {
		c.partition(strategy)
	}
	return out, nil
}

// patchPodMetadata returns the entries of a patchPodMetadata, which mean
// the same here, and warns that the manager must allow their keys: its
// default allows none, and OpenKruise's whitelist (a ConfigMap of its own)
// does not carry over. OpenKruise also writes Overwrite and MergePatchJson
// annotations into running pods at an in-place update; sidecarset writes
// them at injection only.
func (c *converter) patchPodMetadata(v any) []any {
	var out []any
	var keys []string
	inPlace := false
	for i, item := range asSlice(v) {
		p := fmt.Sprintf("spec.patchPodMetadata[%d]", i)
		m, _ := item.(map[string]any)
		conv := map[string]any{}
		for _, k := range sortedKeys(m) {
			switch k {
			case "annotations":
				annotations, _ := m[k].(map[string]any)
				keys = append(keys, sortedKeys(annotations)...)
				conv[k] = m[k]
			case "patchPolicy":
				if pol, _ := m[k].(string); pol != string(v1alpha1.PatchRetain) && pol != "" {
					inPlace = true
				}
				conv[k] = m[k]
			default:
				c.unknown(p + "." + k)
			}
		}
		out = append(out, conv)
	}
	if len(keys) > 0 {
		slices.Sort(keys)
		c.warn("spec.patchPodMetadata writes the annotation keys %s into pods: the manager's %s (the chart's patchPodMetadata.allowedKeys) must allow them, or a prefix of them ending in \"/\" or \"*\"; it allows none by default, and OpenKruise's whitelist does not carry over",
			strings.Join(slices.Compact(keys), ", "), validation.AllowedKeysFlag)
	}
	if inPlace {
		c.notes = append(c.notes, fmt.Sprintf("Note: %s: spec.patchPodMetadata is written into pods at injection only: an in-place update leaves a running pod's annotations alone, where OpenKruise also writes Overwrite and MergePatchJson ones then", c.what))
	}
	return out
}

// labelSelector returns a metav1.LabelSelector's fields of v, dropping
// with a warning any other (some write namespaceSelector.namespaces, which
// no version of OpenKruise has).
func (c *converter) labelSelector(path string, v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		return nil
	}
	out := map[string]any{}
	for _, k := range sortedKeys(m) {
		switch k {
		case "matchLabels", "matchExpressions":
			out[k] = m[k]
		default:
			c.unknown(path + "." + k)
		}
	}
	return out
}

// namespaceSelector builds ours from OpenKruise's label selector and
// v1alpha1's spec.namespace, a matchLabels entry on
// kubernetes.io/metadata.name, which the apiserver sets on every namespace.
// OpenKruise refuses both together; a manifest with both gets both.
func namespaceSelector(sel map[string]any, namespace string) (map[string]any, error) {
	if namespace == "" {
		return sel, nil
	}
	out := maps.Clone(sel)
	if out == nil {
		out = map[string]any{}
	}
	labels, _ := out["matchLabels"].(map[string]any)
	merged := maps.Clone(labels)
	if merged == nil {
		merged = map[string]any{}
	}
	if v, ok := merged[corev1.LabelMetadataName]; ok && v != namespace {
		return nil, fmt.Errorf("spec.namespace %q and a namespaceSelector on %s=%v select no namespace together", namespace, corev1.LabelMetadataName, v)
	}
	merged[corev1.LabelMetadataName] = namespace
	out["matchLabels"] = merged
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
		name, _ := ctr["name"].(string)
		conv := map[string]any{}
		for _, k := range sortedKeys(ctr) {
			v := ctr[k]
			switch {
			case containerFields[k] || k == "podInjectPolicy":
				conv[k] = v
			case k == "upgradeStrategy":
				if s := c.upgradeStrategy(key, path+".upgradeStrategy", name, v); s != nil {
					conv[k] = s
				}
			case k == "shareVolumePolicy" || k == "shareVolumeDevicePolicy":
				if p := c.sharePolicy(path+"."+k, v); p != nil {
					conv[k] = p
				}
			case k == "transferEnv":
				if t := c.transferEnv(path+".transferEnv", v); len(t) > 0 {
					conv[k] = t
				}
			case k == "resourcesPolicy":
				if p := c.resourcesPolicy(path+".resourcesPolicy", v); p != nil {
					conv[k] = p
				}
			default:
				c.unknown(path + "." + k)
			}
		}
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

// upgradeStrategy returns the upgradeStrategy to carry over of the
// container named name, or nil. HotUpgrade means the same here as in
// OpenKruise (NAME-1 and NAME-2, the same SIDECARSET_VERSION and
// SIDECARSET_VERSION_ALT) and is carried over as it is, but on an init
// container: OpenKruise injects those as declared and never upgrades them
// hot, and sidecarset's validation refuses it there. OpenKruise reads any
// other upgradeType as ColdUpgrade (IsHotUpgradeContainer in its
// sidecarcontrol), sidecarset's default, and uses hotUpgradeEmptyImage only
// with HotUpgrade, as sidecarset's validation requires: those are dropped.
func (c *converter) upgradeStrategy(key, path, name string, v any) map[string]any {
	m, _ := v.(map[string]any)
	for _, k := range sortedKeys(m) {
		if k != "upgradeType" && k != "hotUpgradeEmptyImage" {
			c.unknown(path + "." + k)
		}
	}
	typ, hasType := m["upgradeType"]
	image, hasImage := m["hotUpgradeEmptyImage"]
	switch hot := typ == string(v1alpha1.HotUpgrade); {
	case hot && key == "initContainers":
		c.same(path, "OpenKruise injects an init container as declared and upgrades only containers hot (NAME-1 and NAME-2); sidecarset's validation refuses upgradeType HotUpgrade on an init container")
		return nil
	case hot:
		out := map[string]any{"upgradeType": typ}
		if hasImage {
			out["hotUpgradeEmptyImage"] = image
		}
		slots := v1alpha1.HotSlots(cmp.Or(name, "NAME"))
		c.warn("%s (HotUpgrade) carried over: the running pods OpenKruise injected for a hot upgrade (%s and %s) are not adopted, as they carry OpenKruise's version annotations (%s%s, ...), not sidecarset's (%s%s, ...): they keep running unmanaged until recreated, and pods created after step 3 below are sidecarset's; the sidecar reads the same %s and %s variables as with OpenKruise",
			path, slots[0], slots[1], kruiseHotVersionPrefix, slots[0], v1alpha1.AnnotationHotVersionPrefix, slots[0], v1alpha1.EnvHotVersion, v1alpha1.EnvHotVersionAlt)
		return out
	case !hasType:
	case typ == "" || typ == string(v1alpha1.ColdUpgrade):
		c.same(path+".upgradeType", "ColdUpgrade (restart the sidecar with the new image) is sidecarset's default")
	default:
		c.same(path+".upgradeType", fmt.Sprintf("%v is not HotUpgrade, which OpenKruise reads as ColdUpgrade, sidecarset's default", typ))
	}
	if hasImage {
		c.same(path+".hotUpgradeEmptyImage", "only upgradeType HotUpgrade runs the empty image")
	}
	return nil
}

// resourcesPolicy returns a resourcesPolicy with OpenKruise's fields, which
// mean the same here, and notes where the computation differs.
func (c *converter) resourcesPolicy(path string, v any) map[string]any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for _, k := range sortedKeys(m) {
		switch k {
		case "targetContainersMode", "targetContainersNameRegex":
			out[k] = m[k]
		case "resourcesExpr":
			out[k] = c.resourcesExpr(path+".resourcesExpr", m[k])
		case "targetContainerMode", "resourceExpr":
			// OpenKruise's names before kruise#2244, which its samples and
			// English docs still use.
			renamed := map[string]string{"targetContainerMode": "targetContainersMode", "resourceExpr": "resourcesExpr"}[k]
			if _, both := m[renamed]; both {
				c.warn("%s.%s dropped: %s, its newer name, is given too", path, k, renamed)
				continue
			}
			c.warn("%s.%s read as %s, its name since OpenKruise renamed it", path, k, renamed)
			if renamed == "resourcesExpr" {
				out[renamed] = c.resourcesExpr(path+"."+k, m[k])
			} else {
				out[renamed] = m[k]
			}
		default:
			c.unknown(path + "." + k)
		}
	}
	c.notes = append(c.notes, fmt.Sprintf("Note: %s: %s carried over; it differs from OpenKruise's in that results are exact and rounded up once (to 1m of cpu, 1 byte of memory) where OpenKruise truncates to milli-units at each * and /, a cpu expression names only cpu and a memory one only memory, and a pod where targetContainersNameRegex selects no container is created without the SidecarSet, where OpenKruise refuses it", c.what, path))
	return out
}

func (c *converter) resourcesExpr(path string, v any) map[string]any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for _, k := range sortedKeys(m) {
		if k != "limits" && k != "requests" {
			c.unknown(path + "." + k)
			continue
		}
		exprs, _ := m[k].(map[string]any)
		conv := map[string]any{}
		for _, r := range sortedKeys(exprs) {
			if r != "cpu" && r != "memory" {
				c.unknown(path + "." + k + "." + r)
				continue
			}
			conv[r] = exprs[r]
		}
		out[k] = conv
	}
	return out
}

// sharePolicy returns a shareVolumePolicy or shareVolumeDevicePolicy
// that shares, or nil. OpenKruise shares only for the type "enabled",
// spelled so; any other type, "Enabled" too, means not sharing, which is
// what no policy means here.
func (c *converter) sharePolicy(path string, v any) map[string]any {
	m, _ := v.(map[string]any)
	var out map[string]any
	for _, k := range sortedKeys(m) {
		switch val, _ := m[k].(string); {
		case k == "type" && val == "enabled":
			out = map[string]any{"type": val}
		case k == "type" && (val == "" || val == "disabled"):
			c.same(path+".type", "disabled: a sidecar without the policy mounts only what it declares")
		case k == "type":
			c.same(path+".type", fmt.Sprintf("%q is not \"enabled\", so OpenKruise does not share either", val))
		default:
			c.unknown(path + "." + k)
		}
	}
	return out
}

// transferEnv returns the entries of a transferEnv, each naming its source
// one way and its variables one way, as validation wants. Where OpenKruise
// allows both it takes the union of envName and envNames, and
// sourceContainerNameFrom over sourceContainerName; so does the result.
func (c *converter) transferEnv(path string, v any) []any {
	var out []any
	for i, item := range asSlice(v) {
		p := fmt.Sprintf("%s[%d]", path, i)
		m, _ := item.(map[string]any)
		conv := map[string]any{}
		var names []any
		for _, k := range sortedKeys(m) {
			switch val := m[k]; k {
			case "sourceContainerName":
				if _, both := m["sourceContainerNameFrom"]; both {
					c.same(p+".sourceContainerName", "sourceContainerNameFrom is set too, and OpenKruise reads that one")
					continue
				}
				conv[k] = val
			case "sourceContainerNameFrom":
				conv[k] = c.containerNameFrom(p+"."+k, val)
			case "envName":
				names = append([]any{val}, names...)
			case "envNames":
				names = append(names, asSlice(val)...)
			default:
				c.unknown(p + "." + k)
			}
		}
		_, one := m["envName"]
		_, several := m["envNames"]
		switch {
		case one && several:
			c.notes = append(c.notes, fmt.Sprintf("Note: %s: %s: envName and envNames merged into envNames, the variables OpenKruise copies", c.what, p))
			conv["envNames"] = distinct(names)
		case one:
			conv["envName"] = names[0]
		case several:
			conv["envNames"] = names
		}
		out = append(out, conv)
	}
	return out
}

// distinct returns names without the repeats of a string.
func distinct(names []any) []any {
	var out []any
	seen := map[string]bool{}
	for _, n := range names {
		if s, ok := n.(string); ok {
			if seen[s] {
				continue
			}
			seen[s] = true
		}
		out = append(out, n)
	}
	return out
}

func (c *converter) containerNameFrom(path string, v any) map[string]any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for _, k := range sortedKeys(m) {
		if k != "fieldRef" {
			c.unknown(path + "." + k)
			continue
		}
		out[k] = m[k]
	}
	return out
}

func (c *converter) updateStrategy(v any) map[string]any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for _, k := range sortedKeys(m) {
		switch k {
		case "type", "paused", "partition", "maxUnavailable":
			out[k] = m[k]
		case "selector":
			if sel := c.labelSelector("spec.updateStrategy.selector", m[k]); sel != nil {
				out[k] = sel
			}
		case "scatterStrategy":
			if terms := c.scatterStrategy(m[k]); len(terms) > 0 {
				out[k] = terms
			}
		case "priorityStrategy":
			if ps := c.priorityStrategy(m[k]); len(ps) > 0 {
				out[k] = ps
			}
		default:
			c.unknown("spec.updateStrategy." + k)
		}
	}
	return out
}

// scatterStrategy carries the terms over: the same pods are spread, in an
// order of sidecarset's own (rollout.updateOrder), which the note says.
func (c *converter) scatterStrategy(v any) []any {
	var out []any
	for i, t := range asSlice(v) {
		m, _ := t.(map[string]any)
		term := map[string]any{}
		for _, k := range sortedKeys(m) {
			switch k {
			case "key", "value":
				term[k] = m[k]
			default:
				c.unknown(fmt.Sprintf("spec.updateStrategy.scatterStrategy[%d].%s", i, k))
			}
		}
		if v, _ := term["value"].(string); v == "" || v == "*" {
			c.drop(fmt.Sprintf("spec.updateStrategy.scatterStrategy[%d]", i), fmt.Sprintf("value %q: sidecarset spreads the pods of one label value per term; list a term for each value", v))
			continue
		}
		out = append(out, term)
	}
	if len(out) > 0 {
		c.notes = append(c.notes, fmt.Sprintf("Note: %s: spec.updateStrategy.scatterStrategy spreads each term's pods evenly over the update order among pods of equal priority; the exact order differs from OpenKruise's", c.what))
	}
	return out
}

// priorityStrategy carries weightPriority and orderPriority over. A weight
// of 0, which OpenKruise accepts, adds nothing, and sidecarset refuses it:
// such a term is dropped. OpenKruise's controller puts the pods that have
// none of orderPriority's keys first, though its API says last; sidecarset
// puts them last, which the warning says.
func (c *converter) priorityStrategy(v any) map[string]any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for _, k := range sortedKeys(m) {
		path := "spec.updateStrategy.priorityStrategy." + k
		switch k {
		case "weightPriority":
			var terms []any
			for i, t := range asSlice(m[k]) {
				tm, _ := t.(map[string]any)
				term := map[string]any{}
				for _, tk := range sortedKeys(tm) {
					switch tk {
					case "weight":
						term[tk] = tm[tk]
					case "matchSelector":
						term[tk] = c.labelSelector(fmt.Sprintf("%s[%d].matchSelector", path, i), tm[tk])
					default:
						c.unknown(fmt.Sprintf("%s[%d].%s", path, i, tk))
					}
				}
				if w, ok := term["weight"].(int64); ok && w == 0 {
					c.same(fmt.Sprintf("%s[%d]", path, i), "weight 0 adds nothing to a pod's priority")
					continue
				}
				terms = append(terms, term)
			}
			if len(terms) > 0 {
				out[k] = terms
			}
		case "orderPriority":
			var terms []any
			for i, t := range asSlice(m[k]) {
				tm, _ := t.(map[string]any)
				term := map[string]any{}
				for _, tk := range sortedKeys(tm) {
					if tk == "orderedKey" {
						term[tk] = tm[tk]
						continue
					}
					c.unknown(fmt.Sprintf("%s[%d].%s", path, i, tk))
				}
				terms = append(terms, term)
			}
			if len(terms) > 0 {
				out[k] = terms
				c.warn("%s: pods with none of the keys are updated last, as OpenKruise's API describes; OpenKruise's controller updates them first", path)
			}
		default:
			c.unknown(path)
		}
	}
	return out
}

// partition warns where a percentage partition keeps other pods than it
// does in OpenKruise (pkg/controller/sidecarset/sidecarset_strategy.go and
// util.CalculatePartitionReplicas there). OpenKruise takes the percentage
// of all matched pods, rounded up, and lowers it to one pod fewer than all
// when it would keep every pod while under 100%; it then updates the
// selected pods not yet updated beyond that count. sidecarset takes the
// percentage of the selected pods, rounded up, and keeps exactly that
// (rollout.Next). The conversion keeps sidecarset's meaning: the equivalent
// percentage depends on how many pods match and are selected when the
// rollout runs, which a manifest does not say, whereas an integer partition
// means the same in both, which the warning offers.
//
// Worked cases:
//
//	partition 90%, no selector          → with 2 to 9 pods OpenKruise updates one, sidecarset none (5 pods: 1 and 0)
//	partition 50% or less, no selector  → the same in both: no warning
//	partition 50%, selector             → of 10 matched pods with 2 selected, OpenKruise updates 0, sidecarset 1
//	partition 0%, 100%, or 3 (selector or not) → the same in both: no warning
func (c *converter) partition(strategy map[string]any) {
	s, ok := strategy["partition"].(string)
	if !ok {
		return
	}
	p := intstr.FromString(s)
	pct, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || !strings.HasSuffix(s, "%") || pct <= 0 || pct >= 100 {
		return
	}
	if _, ok := strategy["selector"]; ok {
		for _, matched := range []int{10, 20, 50, 100} {
			for selected := 1; selected < matched; selected++ {
				kruise, ours := kruiseUpdates(p, matched, selected), oursUpdates(p, selected)
				if kruise != ours {
					c.warn("spec.updateStrategy.partition %s with updateStrategy.selector: OpenKruise takes the percentage of all matched pods (and updates at least one pod while it is under 100%%), then updates the selected pods beyond that count; sidecarset takes it of the selected pods: of %d matched pods with %d selected, OpenKruise updates %d, sidecarset %d; an integer partition means the same in both", s, matched, selected, kruise, ours)
					return
				}
			}
		}
		return
	}
	// The pod counts where rounding up keeps every pod: n*pct > 100*(n-1).
	upTo := (100+(100-pct)-1)/(100-pct) - 1
	if upTo < 2 {
		return
	}
	example := min(5, upTo)
	c.warn("spec.updateStrategy.partition %s: OpenKruise updates at least one pod while a percentage partition is under 100%%, sidecarset keeps %s of the pods rounded up: with 2 to %d pods it updates none where OpenKruise updates one (%d pods: OpenKruise updates %d, sidecarset %d, and its status says Complete); an integer partition means the same in both",
		s, s, upTo, example, kruiseUpdates(p, example, example), oursUpdates(p, example))
}

// kruiseUpdates is how many of selected pods, none updated, OpenKruise
// updates in all with partition p over matched pods.
func kruiseUpdates(p intstr.IntOrString, matched, selected int) int {
	keep, _ := intstr.GetScaledValueFromIntOrPercent(&p, matched, true)
	if matched > 1 && keep >= matched && p.StrVal != "100%" {
		keep = matched - 1
	}
	return max(selected-keep, 0)
}

// oursUpdates is how many of selected pods, none updated, sidecarset
// updates in all with partition p (rollout.Next's Target).
func oursUpdates(p intstr.IntOrString, selected int) int {
	keep, _ := intstr.GetScaledValueFromIntOrPercent(&p, selected, true)
	return selected - min(keep, selected)
}

func (c *converter) injectionStrategy(v any) map[string]any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for _, k := range sortedKeys(m) {
		switch k {
		case "paused":
			out[k] = m[k]
		case "revision":
			if r := c.injectionRevision(m[k]); len(r) > 0 {
				out[k] = r
			}
		default:
			c.unknown("spec.injectionStrategy." + k)
		}
	}
	return out
}

// injectionRevision carries injectionStrategy.revision over. OpenKruise
// reads revisionName when both it and customVersion are given, which
// sidecarset refuses, so customVersion is then dropped. A revisionName
// names one of OpenKruise's ControllerRevisions, which sidecarset's history
// does not hold: new pods get the latest revision, with a warning, until it
// names one of sidecarset's. Partial is not OpenKruise's draw: a new pod
// gets the latest revision while the pods on it are fewer than the
// rollout's target.
func (c *converter) injectionRevision(v any) map[string]any {
	const path = "spec.injectionStrategy.revision"
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for _, k := range sortedKeys(m) {
		switch k {
		case "revisionName", "customVersion", "policy":
			out[k] = m[k]
		default:
			c.unknown(path + "." + k)
		}
	}
	if name, ok := out["revisionName"]; ok {
		if _, both := out["customVersion"]; both {
			delete(out, "customVersion")
			c.same(path+".customVersion", "revisionName is set too, and OpenKruise reads that one")
		}
		c.warn("%s.revisionName %v names one of OpenKruise's ControllerRevisions, which sidecarset's history does not hold: new pods get the latest revision, with a warning, until it names one of sidecarset's (status.latestRevision, kubectl sidecarset pods NAME), or use customVersion", path, name)
	}
	if version, ok := out["customVersion"]; ok && version != c.customVersion {
		c.warn("%s.customVersion %v names a revision of OpenKruise's history, which does not carry over: new pods get the latest revision, with a warning, until a spec declaring spec.customVersion %v has been applied", path, version, version)
	}
	if out["policy"] == string(v1alpha1.InjectRevisionPartial) {
		c.notes = append(c.notes, fmt.Sprintf("Note: %s: %s.policy Partial gives a new pod the latest revision while the pods on it are fewer than the rollout's target (the matched pods minus the partition, from the status), where OpenKruise draws it at random with the partition's percentage as the odds of the named revision", c.what, path))
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
