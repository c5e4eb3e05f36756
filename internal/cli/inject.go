package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/validation"
)

// NewCmdInject returns `inject -f FILE`.
func NewCmdInject(o *Options) *cobra.Command {
	var file, setsFile string
	exclude := DefaultExcludedNamespaces
	cmd := &cobra.Command{
		Use:   "inject -f FILE|- [--sidecarsets FILE] [--exclude-namespaces NS,...]",
		Short: "Print manifests with the matching SidecarSets injected, without a webhook",
		Long: `Read Pods, Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs and CronJobs
(multi-document YAML, or a List) and print them with the matching SidecarSets
injected into their pod templates, exactly as the webhook would inject them,
records included: pods created from a printed template are not injected again.
Other documents are printed as they came. Warnings go to stderr: the webhook's
admission warnings about each object, and, the first time each SidecarSet is
injected, the warnings the validating webhook gives when that set is applied
(a sidecar without resources, an image by tag), which this command never does.

The SidecarSets come from the cluster, or from --sidecarsets FILE, which needs
no cluster at all. The webhook injects by the namespace a pod is created in, so
an object's namespace is its own, else -n, else the kubeconfig context's (where
kubectl apply -f would create it; a warning says so); with none of these the
object is refused rather than assumed to go to "default". Namespace labels (for
namespaceSelector) come from Namespace documents in the input (inside a List
too), else from the cluster; offline, a namespace not in the input is known by
its name only (kubernetes.io/metadata.name).

The pod webhook never sees the namespaces the chart's webhook.excludeNamespaces
lists, nor the manager's own (--manager-namespace): objects there are printed
as they came. --exclude-namespaces models that list; its default is the chart's.`,
		Example: `  # What would the webhook do to this Deployment?
  kubectl sidecarset inject -f deploy.yaml

  # GitOps: render offline against SidecarSets kept in the repository
  kustomize build overlays/prod | kubectl sidecarset inject -f - --sidecarsets sidecarsets.yaml -n shop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErrorf("-f is required: a file of Pods and workloads, or - for standard input")
			}
			opts := InjectOptions{Namespace: o.Namespace(), ContextNamespace: o.contextNamespace(),
				ManagerNamespace: o.ManagerNamespace, ExcludedNamespaces: exclude}
			var c client.Reader
			if setsFile != "" {
				f, err := openInput(setsFile, o.In)
				if err != nil {
					return fmt.Errorf("--sidecarsets: %w", err)
				}
				sets, warnings, err := ReadSidecarSets(f, "--sidecarsets "+setsFile, o.ManagerNamespace)
				f.Close()
				if err != nil {
					return err
				}
				for _, w := range warnings {
					fmt.Fprintf(o.ErrOut, "Warning: %s\n", w)
				}
				opts.SidecarSets = sets
			} else {
				var err error
				if c, err = o.Client(); err != nil {
					return err
				}
			}
			in, err := openInput(file, o.In)
			if err != nil {
				return err
			}
			defer in.Close()
			opts.Source = "-f " + file
			return Inject(cmd.Context(), c, in, o.Out, o.ErrOut, opts)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "File of Pods and workloads to inject, or - for standard input")
	cmd.Flags().StringVar(&setsFile, "sidecarsets", "", "File of SidecarSets to inject instead of the cluster's (no cluster needed)")
	cmd.Flags().StringSliceVar(&exclude, "exclude-namespaces", exclude,
		"Namespaces the pod webhook never sees (the chart's webhook.excludeNamespaces); the manager's namespace is always added")
	return exits(cmd, map[int]string{
		0: "the manifests are printed",
		1: "an input or a SidecarSet cannot be read or is invalid, or another error",
		5: "unreachable (without --sidecarsets): no kubeconfig, or the apiserver did not answer even after retries",
	})
}

// DefaultExcludedNamespaces are the chart's default webhook.excludeNamespaces
// (charts/sidecarset/values.yaml), to which the chart adds the release
// namespace.
var DefaultExcludedNamespaces = []string{metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// contextNamespace is the namespace the kubeconfig's current (or --context)
// context sets, "" when it sets none or there is no kubeconfig.
func (o *Options) contextNamespace() string {
	raw, err := o.ConfigFlags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return ""
	}
	name := raw.CurrentContext
	if o.ConfigFlags.Context != nil && *o.ConfigFlags.Context != "" {
		name = *o.ConfigFlags.Context
	}
	if ctx, ok := raw.Contexts[name]; ok {
		return ctx.Namespace
	}
	return ""
}

// InjectOptions say what Inject injects and where.
type InjectOptions struct {
	// Namespace (-n) is the namespace of objects without one, else
	// ContextNamespace (the kubeconfig context's); an object with none of
	// the three is refused.
	Namespace, ContextNamespace string
	ManagerNamespace            string
	// ExcludedNamespaces are never injected: the pod webhook does not see
	// them. ManagerNamespace is added.
	ExcludedNamespaces []string
	// SidecarSets, when not nil, are injected instead of the cluster's, and
	// the cluster is not read at all.
	SidecarSets []*v1alpha1.SidecarSet
	// Source names the input in messages.
	Source string
}

// templatePaths says where each workload keeps its pod template, by
// group and kind.
var templatePaths = map[schema.GroupKind][]string{
	{Group: "apps", Kind: "Deployment"}:  {"spec", "template"},
	{Group: "apps", Kind: "StatefulSet"}: {"spec", "template"},
	{Group: "apps", Kind: "DaemonSet"}:   {"spec", "template"},
	{Group: "apps", Kind: "ReplicaSet"}:  {"spec", "template"},
	{Group: "batch", Kind: "Job"}:        {"spec", "template"},
	{Group: "batch", Kind: "CronJob"}:    {"spec", "jobTemplate", "spec", "template"},
}

// Inject prints the documents of in with the matching SidecarSets injected;
// see NewCmdInject. c may be nil when opts.SidecarSets is set.
func Inject(ctx context.Context, c client.Reader, in io.Reader, out, errOut io.Writer, opts InjectOptions) error {
	source := cmp.Or(opts.Source, "the input")
	docs, err := readDocuments(in, source)
	if err != nil {
		return err
	}
	j := &injector{c: c, errOut: errOut, opts: opts, described: map[string]*corev1.Namespace{}, namespaces: map[string]*corev1.Namespace{}, excludedWarned: map[string]bool{}, setsWarned: map[string]bool{}}
	if j.sets, err = j.sidecarSets(ctx); err != nil {
		return err
	}
	for _, d := range docs {
		if err := j.describe(d.obj); err != nil {
			return fmt.Errorf("%s, %s: %w", source, d.describe(), err)
		}
	}
	outDocs := make([][]byte, 0, len(docs))
	for _, d := range docs {
		changed, err := j.object(ctx, d.obj, d.describe())
		if err != nil {
			return fmt.Errorf("%s, %s: %w", source, d.describe(), err)
		}
		if !changed {
			outDocs = append(outDocs, d.raw)
			continue
		}
		b, err := marshal(d.obj)
		if err != nil {
			return fmt.Errorf("%s, %s: %w", source, d.describe(), err)
		}
		outDocs = append(outDocs, b)
	}
	return writeDocuments(out, outDocs)
}

type injector struct {
	c      client.Reader
	errOut io.Writer
	opts   InjectOptions
	sets   []*v1alpha1.SidecarSet
	// described are the Namespace documents of the input; namespaces are
	// the namespaces looked up so far.
	described, namespaces map[string]*corev1.Namespace
	// excludedWarned are the excluded namespaces warned about.
	excludedWarned map[string]bool
	// setsWarned are the SidecarSets whose own warnings were printed.
	setsWarned map[string]bool
}

// describe records the Namespace obj is, or those inside it if it is a
// List (of any depth), for their labels.
func (j *injector) describe(obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	switch kind, _ := obj["kind"].(string); {
	case apiVersion == "v1" && kind == "Namespace":
		ns := &corev1.Namespace{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, ns); err != nil {
			return err
		}
		j.described[ns.Name] = ns
	case apiVersion == "v1" && (kind == "List" || kind == "NamespaceList"):
		items, _ := obj["items"].([]any)
		for i, item := range items {
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			if kind == "NamespaceList" {
				m["apiVersion"], m["kind"] = "v1", "Namespace"
			}
			if err := j.describe(m); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
	}
	return nil
}

func (j *injector) warn(what, msg string) {
	fmt.Fprintf(j.errOut, "Warning: %s: %s\n", what, msg)
}

// warnSets prints, the first time each of the named sets is injected, the
// warnings that hold for it whatever the pod (inject.SetWarnings). The
// validating webhook gives them when a set is applied, which this command
// never does; the pod webhook does not repeat them, so neither does this
// command for every object.
func (j *injector) warnSets(names []string) {
	for _, name := range names {
		if j.setsWarned[name] {
			continue
		}
		j.setsWarned[name] = true
		i := slices.IndexFunc(j.sets, func(s *v1alpha1.SidecarSet) bool { return s.Name == name })
		for _, w := range inject.SetWarnings(j.sets[i]) {
			j.warn("SidecarSet "+name, w)
		}
	}
}

func (j *injector) sidecarSets(ctx context.Context) ([]*v1alpha1.SidecarSet, error) {
	if j.opts.SidecarSets != nil {
		return j.opts.SidecarSets, nil
	}
	var list v1alpha1.SidecarSetList
	if err := j.c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list SidecarSets (or give --sidecarsets FILE to work offline): %w", err)
	}
	sets := make([]*v1alpha1.SidecarSet, len(list.Items))
	for i := range list.Items {
		sets[i] = &list.Items[i]
	}
	return sets, nil
}

// object injects into obj, in place, if it is a pod or holds a pod
// template, and reports whether it changed.
func (j *injector) object(ctx context.Context, obj map[string]any, what string) (bool, error) {
	if obj == nil {
		return false, nil
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		// Not an object this command knows, nor one kubectl would apply.
		j.warn(what, fmt.Sprintf("%v; printed as it came", err))
		return false, nil
	}
	switch gk := (schema.GroupKind{Group: gv.Group, Kind: kind}); gk {
	case schema.GroupKind{Kind: "Pod"}:
		return j.pod(ctx, obj, what)
	case schema.GroupKind{Kind: "List"}:
		items, _ := obj["items"].([]any)
		changed := false
		for i, item := range items {
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			c, err := j.object(ctx, m, fmt.Sprintf("%s, item %d (%s)", what, i, document{obj: m, index: i}.describe()))
			if err != nil {
				return false, err
			}
			changed = changed || c
		}
		return changed, nil
	default:
		if path, ok := templatePaths[gk]; ok {
			return j.template(ctx, obj, path, what)
		}
	}
	return false, nil
}

// pod injects into a Pod object.
func (j *injector) pod(ctx context.Context, obj map[string]any, what string) (bool, error) {
	pod := &corev1.Pod{}
	if err := j.decode(obj, pod, what); err != nil {
		return false, err
	}
	res, err := j.inject(ctx, pod, pod.Namespace, what)
	if err != nil || res == nil {
		return false, err
	}
	res.Namespace = pod.Namespace
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(res)
	if err != nil {
		return false, fmt.Errorf("encode injected pod: %w", err)
	}
	if _, had := obj["status"]; !had {
		delete(u, "status")
	}
	clean(u)
	clear(obj)
	maps.Copy(obj, u)
	return true, nil
}

// template injects into the pod template at path.
func (j *injector) template(ctx context.Context, obj map[string]any, path []string, what string) (bool, error) {
	raw, found, err := unstructured.NestedMap(obj, path...)
	if err != nil {
		j.warn(what, fmt.Sprintf("pod template at %s: %v; printed as it came", strings.Join(path, "."), err))
		return false, nil
	}
	if !found {
		j.warn(what, fmt.Sprintf("no pod template at %s; printed as it came", strings.Join(path, ".")))
		return false, nil
	}
	tmpl := &corev1.PodTemplateSpec{}
	if err := j.decode(raw, tmpl, what); err != nil {
		return false, err
	}
	ns, _, _ := unstructured.NestedString(obj, "metadata", "namespace")
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	res, err := j.inject(ctx, pod, ns, what)
	if err != nil || res == nil {
		return false, err
	}
	res.Namespace = tmpl.Namespace
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.PodTemplateSpec{ObjectMeta: res.ObjectMeta, Spec: res.Spec})
	if err != nil {
		return false, fmt.Errorf("encode injected pod template: %w", err)
	}
	clean(u)
	if err := unstructured.SetNestedMap(obj, u, path...); err != nil {
		return false, fmt.Errorf("write pod template: %w", err)
	}
	return true, nil
}

// decode converts an unstructured pod or template into into. Fields the
// Kubernetes API of this build does not know would be lost on the way; they
// are named in a warning rather than dropped silently.
func (j *injector) decode(u map[string]any, into any, what string) error {
	err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u, into, true)
	if err == nil {
		return nil
	}
	if !runtime.IsStrictDecodingError(err) {
		return fmt.Errorf("decode: %w", err)
	}
	j.warn(what, fmt.Sprintf("if a SidecarSet is injected, these fields are dropped from the output, unknown to this kubectl-sidecarset: %v", err))
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u, into)
}

// inject runs inject.Inject on pod in namespace ns (its own, else -n, else
// the kubeconfig context's), prints its warnings, and returns the injected
// pod, nil when no SidecarSet matched or the webhook would not see the
// namespace.
func (j *injector) inject(ctx context.Context, pod *corev1.Pod, ns, what string) (*corev1.Pod, error) {
	switch {
	case ns != "":
	case j.opts.Namespace != "":
		ns = j.opts.Namespace
	case j.opts.ContextNamespace != "":
		ns = j.opts.ContextNamespace
		j.warn(what, fmt.Sprintf("no metadata.namespace: injected as in namespace %s, the kubeconfig context's, where kubectl apply -f would create it; give -n to choose", ns))
	default:
		return nil, fmt.Errorf("no metadata.namespace, no -n, and the kubeconfig context sets none: the webhook injects by the namespace a pod is created in; give -n NAMESPACE")
	}
	if ns == j.opts.ManagerNamespace || slices.Contains(j.opts.ExcludedNamespaces, ns) {
		if !j.excludedWarned[ns] {
			j.warn("namespace "+ns, "the pod webhook never sees it (--exclude-namespaces, or the manager's namespace): nothing injected there")
			j.excludedWarned[ns] = true
		}
		return nil, nil
	}
	pod.Namespace = ns
	nsObj, err := j.namespace(ctx, ns)
	if err != nil {
		return nil, err
	}
	res := inject.Inject(pod, nsObj, j.sets, inject.Options{ManagerNamespace: j.opts.ManagerNamespace})
	j.warnSets(res.Injected)
	for _, w := range res.Warnings {
		j.warn(what, w)
	}
	if len(res.Injected) == 0 {
		return nil, nil
	}
	return res.Pod, nil
}

// namespace returns what is known of namespace name: its document in the
// input, else the cluster's, else its name (the apiserver labels every
// namespace kubernetes.io/metadata.name=<name>).
func (j *injector) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if ns, ok := j.namespaces[name]; ok {
		return ns, nil
	}
	ns := j.described[name]
	if ns == nil && j.c != nil {
		ns = &corev1.Namespace{}
		if err := j.c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("get namespace %s: %w", name, err)
			}
			ns = nil
		}
	}
	if ns == nil {
		// The system namespaces and the manager's are never injected
		// unless a set allows them by annotation: their labels rarely
		// matter, and a warning about them would be noise.
		system := name == metav1.NamespaceSystem || name == metav1.NamespacePublic || name == corev1.NamespaceNodeLease || name == j.opts.ManagerNamespace
		if !system && slices.ContainsFunc(j.sets, func(s *v1alpha1.SidecarSet) bool { return s.Spec.NamespaceSelector != nil }) {
			where := "offline"
			if j.c != nil {
				where = "it does not exist in the cluster"
			}
			j.warn("namespace "+name, fmt.Sprintf("labels unknown (%s, and no Namespace document in the input): namespaceSelectors see only %s=%s", where, corev1.LabelMetadataName, name))
		}
		ns = &corev1.Namespace{}
		ns.Name = name
	}
	ns = ns.DeepCopy()
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
	j.namespaces[name] = ns
	return ns, nil
}

// clean removes what converting a typed object adds to one that never had
// it: a null creationTimestamp.
func clean(u map[string]any) {
	if meta, ok := u["metadata"].(map[string]any); ok {
		if v, ok := meta["creationTimestamp"]; ok && v == nil {
			delete(meta, "creationTimestamp")
		}
	}
}

// ReadSidecarSets reads SidecarSets from a --sidecarsets file (documents,
// a SidecarSetList or a List), defaulted as the apiserver would store them,
// so the revision hashes recorded in pods match the cluster's. A SidecarSet
// the validating webhook would refuse is left out with a warning: it could
// never inject anything.
func ReadSidecarSets(r io.Reader, source, managerNamespace string) ([]*v1alpha1.SidecarSet, []string, error) {
	docs, err := readDocuments(r, source)
	if err != nil {
		return nil, nil, err
	}
	var sets []*v1alpha1.SidecarSet
	for _, d := range docs {
		if d.obj == nil {
			continue
		}
		var items []map[string]any
		switch api, kind := d.kind(); {
		case kind == "SidecarSet" && api == v1alpha1.GroupVersion.String():
			items = []map[string]any{d.obj}
		case kind == "SidecarSetList" && api == v1alpha1.GroupVersion.String(), kind == "List" && api == "v1":
			list, _ := d.obj["items"].([]any)
			for _, it := range list {
				m, _ := it.(map[string]any)
				items = append(items, m)
			}
		case strings.HasPrefix(api, "apps.kruise.io/"):
			return nil, nil, fmt.Errorf("%s, %s: an OpenKruise %s; convert it first: kubectl sidecarset convert -f FILE", source, d.describe(), kind)
		default:
			return nil, nil, fmt.Errorf("%s, %s: apiVersion %q kind %q is not a %s SidecarSet", source, d.describe(), api, kind, v1alpha1.GroupVersion)
		}
		for i, item := range items {
			set, err := decodeSidecarSet(item)
			if err != nil {
				return nil, nil, fmt.Errorf("%s, %s, SidecarSet %d: %w", source, d.describe(), i+1, err)
			}
			sets = append(sets, set)
		}
	}
	var kept []*v1alpha1.SidecarSet
	var warnings []string
	for _, set := range sets {
		validation.Default(set)
		if errs := validation.ValidateCreate(set, sets, validation.Options{ManagerNamespace: managerNamespace, AnyAnnotationKey: true}); len(errs) > 0 {
			warnings = append(warnings, fmt.Sprintf("SidecarSet %q in %s would be refused by the validating webhook, so it is not injected: %v", set.Name, source, errs.ToAggregate()))
			continue
		}
		kept = append(kept, set)
	}
	// Not nil even when empty: "no SidecarSets" is an answer, not "ask the
	// cluster".
	if kept == nil {
		kept = []*v1alpha1.SidecarSet{}
	}
	return kept, warnings, nil
}

// decodeSidecarSet decodes one SidecarSet strictly: a misspelt field would
// otherwise be silently ignored, and the sidecar injected without it.
func decodeSidecarSet(obj map[string]any) (*v1alpha1.SidecarSet, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	set := &v1alpha1.SidecarSet{}
	if err := dec.Decode(set); err != nil {
		return nil, err
	}
	return set, nil
}
