package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// Pod states as `pods` shows them.
const (
	StateUpdated       = "updated"
	StateUpdating      = "updating"
	StateNotUpgradable = "not-upgradable"
	StateDrifted       = "drifted"
	StateOld           = "old"
)

// NewCmdPods returns `pods NAME`.
func NewCmdPods(o *Options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "pods NAME",
		Short: "List a SidecarSet's pods with their sidecar images and rollout state",
		Long: `List the pods that carry the SidecarSet's injection record, one line each:
the revision the pod's sidecars were last set to; per sidecar (comma-separated,
in order) the image the SidecarSet declares for the pod (DECLARED: the one last
written, as the pod's record says), the image and image ID the kubelet reports
running; whether the pod is Ready with every sidecar running what was written;
and its STATE, judged as the controller judges it, the first that holds:

  updating        an in-place update (image, or cpu and memory) was written and
                  the kubelet has not finished it yet
  drifted         a sidecar image in the pod spec was changed by hand: DECLARED
                  is what was written, RUNNING what the kubelet runs since
  not-upgradable  something changed since the pod was injected that a running
                  pod cannot take (beyond images, and cpu and memory the
                  apiserver resizes), or the kubelet holds a resize: it needs a
                  recreate
  updated         on the latest revision
  old             on an older revision, waiting for its turn (partition,
                  maxUnavailable, paused)

REASON lists, as NAME:REASON, why each sidecar that keeps running does not
serve, in the kubelet's words: its waiting reason (ErrImagePull,
ImagePullBackOff, CrashLoopBackOff, ContainerCreating...), the reason it
terminated, or NotReady while it runs and its readiness probe fails. An
updating pod whose new image cannot pull shows, for instance,
exporter:ImagePullBackOff.

IMAGE-ID shows the digest shortened to 12 hex digits; -o wide shows it whole,
with the node. Without -n, pods of every namespace are listed.

Below, a second table lists the pods the SidecarSet was left out of when they
were created (SKIPPED: a mounted volume the pod lacks, a port clash, the
namespace's Pod Security level), with the REASON the webhook recorded on the
pod; restart --skipped recreates them. -o json and -o yaml print the first
table only.`,
		Example: `  # Every pod of mysql-exporter
  kubectl sidecarset pods mysql-exporter

  # Those in one namespace, with full image IDs and nodes
  kubectl sidecarset pods mysql-exporter -n shop -o wide

  # As JSON (a meta.k8s.io/v1 Table), e.g. the pods still on an old revision
  kubectl sidecarset pods mysql-exporter -o json | jq -r '.rows[] | select(.cells[7] == "old") | .cells[0]'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateOutput(output); err != nil {
				return err
			}
			if output == "name" {
				return usageErrorf("--output name: pods prints a table, not objects; its rows start with NAMESPACE/NAME: -o jsonpath='{.rows[*].cells[0]}' lists them")
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			return Pods(cmd.Context(), c, o.Out, PodsOptions{
				Name:             args[0],
				Namespace:        o.Namespace(),
				ManagerNamespace: o.ManagerNamespace,
				Output:           output,
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: wide, or as kubectl get, of the table as a Table object: json, yaml, jsonpath=..., go-template=... (default: a table)")
	return exits(cmd, map[int]string{
		0: "the pods are listed",
		1: "no such SidecarSet, or another error",
		5: "",
	})
}

// PodsOptions says which pods Pods lists and how.
type PodsOptions struct {
	Name string
	// Namespace limits the list to one namespace; empty means all.
	Namespace        string
	ManagerNamespace string
	Output           string
	// Now is the time ages are measured from; zero means the clock's.
	Now time.Time
}

// Pods prints one line per pod of the SidecarSet: the active pods that its
// selectors match and that carry its record, the pods status.matchedPods
// counts. As a table, it then lists the pods the set was left out of at
// their creation, those status.skippedPods counts, with why.
func Pods(ctx context.Context, c client.Reader, out io.Writer, opts PodsOptions) error {
	set := &v1alpha1.SidecarSet{}
	if err := c.Get(ctx, client.ObjectKey{Name: opts.Name}, set); err != nil {
		return fmt.Errorf("get SidecarSet %s: %w", opts.Name, err)
	}
	pods, err := setPods(ctx, c, set, opts.Namespace, opts.ManagerNamespace)
	if err != nil {
		return err
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	t := podsTable(pods, now, opts.Output != OutputTable)
	if !isTable(opts.Output) {
		t.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("Table"))
		return printObject(out, t, opts.Output)
	}
	skipped, err := skippedPods(ctx, c, set, opts.Namespace, opts.ManagerNamespace)
	if err != nil {
		return err
	}
	if len(t.Rows) == 0 {
		_, err = fmt.Fprintf(out, "No pods carry SidecarSet %s's record%s.\n", opts.Name, inNamespace(opts.Namespace))
	} else {
		err = printTable(out, t, opts.Output == OutputWide)
	}
	if err != nil || len(skipped.Rows) == 0 {
		return err
	}
	if _, err := fmt.Fprintln(out); err != nil {
		return err
	}
	return printTable(out, skipped, opts.Output == OutputWide)
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

// setPod is a pod of a SidecarSet, classified as the controller does.
type setPod struct {
	pod *corev1.Pod
	rollout.Pod
}

// setPods returns the set's pods in namespace (all when empty), sorted by
// namespace/name: those rollout.MemberOf finds Managed, as the controller
// does.
func setPods(ctx context.Context, c client.Reader, set *v1alpha1.SidecarSet, namespace, managerNamespace string) ([]setPod, error) {
	var list corev1.PodList
	listOpts := []client.ListOption{client.MatchingLabels{v1alpha1.LabelManaged: "true"}}
	if namespace != "" {
		listOpts = append(listOpts, client.InNamespace(namespace))
	}
	if err := c.List(ctx, &list, listOpts...); err != nil {
		return nil, fmt.Errorf("list pods labelled %s=true: %w", v1alpha1.LabelManaged, err)
	}
	latest, err := latestOf(ctx, c, set, managerNamespace)
	if err != nil {
		return nil, err
	}
	namespaces := namespaceCache{c: c}
	var out []setPod
	for i := range list.Items {
		pod := &list.Items[i]
		ns, err := namespaces.get(ctx, pod.Namespace)
		if err != nil {
			return nil, err
		}
		// Only Managed pods are listed: a canary's pods carry no record of
		// its base, so the base's canaries change nothing here.
		m := rollout.MemberOf(pod, set, nil, ns, inject.Options{ManagerNamespace: managerNamespace})
		if m.Membership != rollout.Managed {
			continue
		}
		out = append(out, setPod{pod: pod, Pod: rollout.Classify(pod, m.Record, latest)})
	}
	slices.SortFunc(out, func(a, b setPod) int {
		return cmp.Or(cmp.Compare(a.pod.Namespace, b.pod.Namespace), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	return out, nil
}

// skippedPods is a table of the active pods in namespace (all when empty)
// that the set was left out of at their creation (rollout.MemberOf finds
// them Skipped, as status.skippedPods counts them), sorted by
// namespace/name, each with the reason the webhook recorded. Their
// metadata is all it reads.
func skippedPods(ctx context.Context, c client.Reader, set *v1alpha1.SidecarSet, namespace, managerNamespace string) (*metav1.Table, error) {
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || set.Spec.Selector == nil {
		return nil, fmt.Errorf("%s: spec.selector: %w", set.Name, cmp.Or(err, errors.New("not set")))
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	listOpts := []client.ListOption{client.MatchingLabelsSelector{Selector: selector},
		client.MatchingFieldsSelector{Selector: rollout.NotFinished}}
	if namespace != "" {
		listOpts = append(listOpts, client.InNamespace(namespace))
	}
	if err := c.List(ctx, list, listOpts...); err != nil {
		return nil, fmt.Errorf("list pods matching %s: %w", selector, err)
	}
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("SKIPPED", "namespace/name of a pod created without the SidecarSet.", false),
		column("REASON", "Why the SidecarSet was left out of it (annotation "+v1alpha1.AnnotationSkippedReasons+").", false),
	}}
	slices.SortFunc(list.Items, func(a, b metav1.PartialObjectMetadata) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	namespaces := namespaceCache{c: c}
	for i := range list.Items {
		m := &list.Items[i]
		ns, err := namespaces.get(ctx, m.Namespace)
		if err != nil {
			return nil, err
		}
		// No canaries: a pod a canary replaces the set in was never
		// judged for the set, so it is never skipped for it.
		pod := &corev1.Pod{ObjectMeta: m.ObjectMeta}
		if rollout.MemberOf(pod, set, nil, ns, inject.Options{ManagerNamespace: managerNamespace}).Membership != rollout.Skipped {
			continue
		}
		why, ok := inject.SkipReason(m.Annotations, set.Name)
		if !ok {
			why = fmt.Sprintf("not recorded on the pod: see the SidecarSet's %s events", inject.ReasonInjectionSkipped)
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{m.Namespace + "/" + m.Name, why}})
	}
	return t, nil
}

// namespaceCache reads each namespace once. A namespace that is gone is
// known by its name only, as the controller does.
type namespaceCache struct {
	c    client.Reader
	seen map[string]*corev1.Namespace
}

func (n *namespaceCache) get(ctx context.Context, name string) (*corev1.Namespace, error) {
	if ns, ok := n.seen[name]; ok {
		return ns, nil
	}
	ns := &corev1.Namespace{}
	if err := n.c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get namespace %s: %w", name, err)
		}
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	if n.seen == nil {
		n.seen = map[string]*corev1.Namespace{}
	}
	n.seen[name] = ns
	return ns, nil
}

// latestOf returns set's latest revision as the controller judges pods
// against it: with the revisions of its history whose pods reach it in
// place by a resize, read from the manager's namespace.
func latestOf(ctx context.Context, c client.Reader, set *v1alpha1.SidecarSet, managerNamespace string) (rollout.Latest, error) {
	var list appsv1.ControllerRevisionList
	if err := c.List(ctx, &list, client.InNamespace(managerNamespace),
		client.MatchingLabels{v1alpha1.LabelSidecarSet: set.Name}); err != nil {
		return rollout.Latest{}, fmt.Errorf("list revisions of %s in %s (see --manager-namespace): %w", set.Name, managerNamespace, err)
	}
	latest := rollout.NewLatest(set)
	latest.ResizableFrom = revision.ResizableFrom(&set.Spec, list.Items)
	latest.Now = time.Now()
	return latest, nil
}

// podState names a pod's state. The order says which wins when several
// hold: an update in flight is what is happening now; a hand edit is this
// pod's alone, and driftPolicy Revert undoes it in place, where a change of
// the set that needs a recreate makes every pod not upgradable at once and
// would hide the one edited (the status counts both).
func podState(p rollout.Pod) string {
	switch {
	case p.Updating:
		return StateUpdating
	case len(p.Drifted) > 0:
		return StateDrifted
	case !p.Upgradable:
		return StateNotUpgradable
	case p.Updated:
		return StateUpdated
	}
	return StateOld
}

// podsTable has one row per pod. fullIDs shows whole image IDs rather than
// short digests.
func podsTable(pods []setPod, now time.Time, fullIDs bool) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("POD", "namespace/name.", false),
		column("REVISION", "The revision the pod's sidecars were last set to.", false),
		column("SIDECARS", "The SidecarSet's containers in the pod.", false),
		column("DECLARED", "Each sidecar's image as the SidecarSet declares it for the pod: the one last written, as the pod's record says.", false),
		column("RUNNING", "Each sidecar's image as the kubelet reports it (status.image).", false),
		column("IMAGE-ID", "Each sidecar's running image ID (status.imageID).", false),
		column("READY", "Pod Ready and every sidecar running what was written.", false),
		column("STATE", "updating, drifted, not-upgradable, updated or old.", false),
		column("NODE", "The pod's node.", true),
		column("AGE", "Since the pod was created.", true),
		// Last, so that the cells before keep their places in -o json.
		column("REASON", "Why each sidecar that keeps running does not serve, as NAME:REASON: the kubelet's waiting or terminated reason, or NotReady.", false),
	}}
	for _, p := range pods {
		var names, declared, running, ids, reasons []string
		for _, c := range p.Containers {
			st := sidecarStatus(p.pod, c.Name, c.Init)
			names = append(names, c.Name)
			declared = append(declared, c.Recorded.Image)
			running = append(running, orNone(st.Image))
			id := orNone(c.ImageID)
			if !fullIDs {
				id = shortImageID(c.ImageID)
			}
			ids = append(ids, id)
			// An ordinary init container ran to completion; only those
			// that keep running serve.
			if why := notServing(st); c.Runs && why != "" {
				reasons = append(reasons, c.Name+":"+why)
			}
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			p.pod.Namespace + "/" + p.pod.Name,
			p.Record.Revision,
			joined(names), joined(declared), joined(running), joined(ids),
			strconv.FormatBool(p.Ready),
			podState(p.Pod),
			orNone(p.pod.Spec.NodeName),
			age(p.pod.CreationTimestamp, now),
			joined(reasons),
		}})
	}
	return t
}

// sidecarStatus is the status the kubelet reports for a container; empty
// before it reports one.
func sidecarStatus(pod *corev1.Pod, name string, init bool) corev1.ContainerStatus {
	statuses := pod.Status.ContainerStatuses
	if init {
		statuses = pod.Status.InitContainerStatuses
	}
	for _, s := range statuses {
		if s.Name == name {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

// notServing says in one word why a container that should keep running
// does not serve, from its status, or "" when it serves or has no status
// yet: the kubelet's reason for waiting (the image does not pull, the
// container crashes and is backed off) or for its end, or NotReady while
// it runs and its readiness probe fails.
func notServing(st corev1.ContainerStatus) string {
	switch s := st.State; {
	case s.Waiting != nil:
		return cmp.Or(s.Waiting.Reason, "Waiting")
	case s.Terminated != nil:
		return cmp.Or(s.Terminated.Reason, "Terminated")
	case s.Running != nil && !st.Ready:
		return "NotReady"
	}
	return ""
}

// shortImageID keeps the algorithm and 12 hex digits of an image ID's
// digest, as `docker images` shortens IDs: "repo@sha256:1a2b..." and
// "sha256:1a2b..." both give "sha256:1a2b3c4d5e6f".
func shortImageID(id string) string {
	if id == "" {
		return "<none>"
	}
	d := id
	if i := strings.LastIndex(d, "@"); i >= 0 {
		d = d[i+1:]
	}
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return algo + ":" + hex[:12]
}
