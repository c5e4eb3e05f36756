package cli

import (
	"cmp"
	"context"
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
in order) the image in the pod spec (DECLARED), the image and image ID the
kubelet reports running; whether the pod is Ready with every sidecar running
what was written; and its STATE, judged as the controller judges it:

  updating        an in-place update (image, or cpu and memory) was written and
                  the kubelet has not finished it yet
  not-upgradable  something changed since the pod was injected that a running
                  pod cannot take (beyond images, and cpu and memory the
                  apiserver resizes), or the kubelet holds a resize: it needs a
                  recreate
  drifted         a sidecar image in the pod spec was changed by hand
  updated         on the latest revision
  old             on an older revision, waiting for its turn (partition,
                  maxUnavailable, paused)

IMAGE-ID shows the digest shortened to 12 hex digits; -o wide shows it whole,
with the node. Without -n, pods of every namespace are listed.`,
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
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: wide, json or yaml (default: a table)")
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
// counts.
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
	if len(t.Rows) == 0 {
		_, err := fmt.Fprintf(out, "No pods carry SidecarSet %s's record%s.\n", opts.Name, inNamespace(opts.Namespace))
		return err
	}
	return printTable(out, t, opts.Output == OutputWide)
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
// hold: an update in flight is what is happening now; a pod that needs a
// recreate cannot be fixed in place, drift included.
func podState(p rollout.Pod) string {
	switch {
	case p.Updating:
		return StateUpdating
	case !p.Upgradable:
		return StateNotUpgradable
	case len(p.Drifted) > 0:
		return StateDrifted
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
		column("DECLARED", "Each sidecar's image in the pod spec.", false),
		column("RUNNING", "Each sidecar's image as the kubelet reports it (status.image).", false),
		column("IMAGE-ID", "Each sidecar's running image ID (status.imageID).", false),
		column("READY", "Pod Ready and every sidecar running what was written.", false),
		column("STATE", "updated, updating, not-upgradable, drifted or old.", false),
		column("NODE", "The pod's node.", true),
		column("AGE", "Since the pod was created.", true),
	}}
	for _, p := range pods {
		var names, declared, running, ids []string
		for _, c := range p.Containers {
			names = append(names, c.Name)
			declared = append(declared, c.Image)
			running = append(running, orNone(statusImage(p.pod, c.Name, c.Init)))
			id := orNone(c.ImageID)
			if !fullIDs {
				id = shortImageID(c.ImageID)
			}
			ids = append(ids, id)
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			p.pod.Namespace + "/" + p.pod.Name,
			p.Record.Revision,
			joined(names), joined(declared), joined(running), joined(ids),
			strconv.FormatBool(p.Ready),
			podState(p.Pod),
			orNone(p.pod.Spec.NodeName),
			age(p.pod.CreationTimestamp, now),
		}})
	}
	return t
}

// statusImage is the image the kubelet reports for a container.
func statusImage(pod *corev1.Pod, name string, init bool) string {
	statuses := pod.Status.ContainerStatuses
	if init {
		statuses = pod.Status.InitContainerStatuses
	}
	for _, s := range statuses {
		if s.Name == name {
			return s.Image
		}
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
