package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// AnnotationRestartedAt is what `kubectl rollout restart` writes into a pod
// template to roll a workload's pods.
const AnnotationRestartedAt = "kubectl.kubernetes.io/restartedAt"

// restartLong is the help both restart verbs share.
const restartLong = `Recreate, through their workloads, the pods of a SidecarSet that its
controller cannot bring to the latest revision in place, so that the new pods
get it at injection. Which pods:

  --not-upgradable  (the default) pods that carry the SidecarSet's record but
                    differ from its latest revision in more than images
                    (status.notUpgradablePods: an env, a port, a volume...)
  --unmanaged       pods the selectors match that carry no record of it
                    (status.unmanagedPods: created before the SidecarSet, or
                    while the webhook was down)
  --skipped         pods the webhook skipped the SidecarSet for
                    (status.skippedPods: a name clash, a volume the pod
                    lacks...), once the cause is fixed

The flags combine. Their Deployments, StatefulSets and DaemonSets are
restarted one at a time, as kubectl rollout restart does (the
kubectl.kubernetes.io/restartedAt annotation on the pod template), and each
rollout must finish before the next starts.

Before anything is restarted, each workload is checked; --dry-run lists what
these checks leave, which is exactly what a real run restarts:

  - not touched: pods without an owner (listed, never deleted), with another
    kind of owner (Job, a ReplicaSet without a Deployment, ...), opted out
    with sidecarset.dev/inject: "false"; StatefulSets and DaemonSets with
    updateStrategy OnDelete and paused Deployments, whose pods a restart
    would not replace.
  - refused: a server-side dry-run create of a pod of the workload's
    template, in its namespace, does not come back with the SidecarSet
    injected (a container name clash, a volume the pod lacks, a namespace
    the webhook does not see...): restarted pods would lack it again. The
    webhook's reason is shown.
  - refused: the workload's own rolling update would take more pods down at
    once (its maxUnavailable) than a PodDisruptionBudget over its pods ever
    allows; the numbers are shown.

  - refused: a pod of the workload is on an older revision of a SidecarSet
    (this one or another) whose updateStrategy holds it there (paused, type
    NotUpdate, a partition above 0, a selector that leaves it out), or
    carries a SidecarSet whose injection is paused: new pods get every
    set's latest revision at injection, so recreating it would move it past
    what the operator allowed, or drop its sidecars; or a pod of it opted
    out by hand (the annotation on the pod, not in the template), which
    would come back with the sidecars. Checked again just before each
    restart, as is this SidecarSet's own injection: paused or deleted
    since the run began, the workloads still to restart are refused.

Before each restart, every such budget must allow as many disruptions as the
rollout takes at once (status.disruptionsAllowed); that is waited for up to
--timeout. After each rollout the workload's new pods are read back: a pod
still without the record, or still not upgradable, is warned about. A
workload deleted during the run is skipped; a rollout not finished within
--timeout stops the run, and is reported as restarted but not finished. A
call that fails transiently is retried with back-off. On a terminal a bar
counts the workloads done. Refused workloads make the run exit 1 after the
others are restarted.`

// NewCmdRestart returns `restart NAME`.
func NewCmdRestart(o *Options) *cobra.Command {
	opts := RestartOptions{Timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "restart NAME [--not-upgradable] [--unmanaged] [--skipped] [--dry-run]",
		Short: "Rolling-restart the workloads of pods that cannot take a SidecarSet's latest revision in place",
		Long:  restartLong,
		Example: `  # Which workloads hold pods that need a recreate for the latest revision?
  kubectl sidecarset restart mysql-exporter --dry-run

  # Recreate those, and the pods made without the sidecars, 10 minutes per rollout
  kubectl sidecarset restart mysql-exporter --not-upgradable --unmanaged --timeout 10m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !opts.Which.NotUpgradable && !opts.Which.Unmanaged && !opts.Which.Skipped {
				opts.Which.NotUpgradable = true
			}
			return runRestart(cmd, o, args[0], opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Which.NotUpgradable, "not-upgradable", false, "Recreate the pods that differ from the latest revision in more than images (the default when no kind is named)")
	cmd.Flags().BoolVar(&opts.Which.Unmanaged, "unmanaged", false, "Recreate the pods the selectors match that carry no record of the SidecarSet")
	cmd.Flags().BoolVar(&opts.Which.Skipped, "skipped", false, "Recreate the pods the webhook skipped the SidecarSet for")
	restartFlags(cmd, &opts)
	return exits(cmd, restartExits())
}

// NewCmdRestartUnmanaged returns `restart-unmanaged NAME`, which is
// `restart NAME --unmanaged`.
func NewCmdRestartUnmanaged(o *Options) *cobra.Command {
	opts := RestartOptions{Timeout: 5 * time.Minute, Which: Which{Unmanaged: true}}
	cmd := &cobra.Command{
		Use:   "restart-unmanaged NAME [--dry-run]",
		Short: "Rolling-restart the workloads of pods that match a SidecarSet but lack its sidecars (restart --unmanaged)",
		Long:  "The same as `restart NAME --unmanaged`.\n\n" + restartLong,
		Example: `  # What would be restarted?
  kubectl sidecarset restart-unmanaged mysql-exporter --dry-run

  # Restart, allowing each rollout 10 minutes
  kubectl sidecarset restart-unmanaged mysql-exporter --timeout 10m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRestart(cmd, o, args[0], opts)
		},
	}
	restartFlags(cmd, &opts)
	return exits(cmd, restartExits())
}

// restartExits are the exit codes of both restart verbs.
func restartExits() map[int]string {
	return map[int]string{
		0: "the workloads are restarted (with --dry-run, listed), or none needs it",
		1: "a workload was refused (after the others are restarted), or another error",
		3: "spec.injectionStrategy.paused: restarted pods would not get the sidecars",
		4: "--timeout ran out waiting for a PodDisruptionBudget, or for a restarted workload's rollout",
		5: "",
	}
}

func restartFlags(cmd *cobra.Command, opts *RestartOptions) {
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "Only list the pods and the workloads a real run would restart")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", opts.Timeout, "How long to wait for PodDisruptionBudgets to allow the restart, and for each rollout")
}

func runRestart(cmd *cobra.Command, o *Options, name string, opts RestartOptions) error {
	if opts.Timeout <= 0 {
		return usageErrorf("--timeout %s: must be positive", opts.Timeout)
	}
	c, err := o.RetryingClient()
	if err != nil {
		return err
	}
	opts.Name = name
	opts.ManagerNamespace = o.ManagerNamespace
	opts.Interval = o.PollInterval
	opts.Terminal = o.IsTerminal(o.Out)
	return Restart(cmd.Context(), c, o.Out, opts)
}

// Which says which of a SidecarSet's pods Restart recreates.
type Which struct {
	NotUpgradable, Unmanaged, Skipped bool
}

// RestartOptions say what Restart restarts and how long it waits.
type RestartOptions struct {
	Name             string
	Which            Which
	DryRun           bool
	ManagerNamespace string
	Timeout          time.Duration
	Interval         time.Duration
	// Terminal draws a bar of the workloads done below the run's lines.
	Terminal bool
}

// Kinds of pods Restart recreates, as its output names them.
const (
	kindNotUpgradable = "not-upgradable"
	kindUnmanaged     = "unmanaged"
	kindSkipped       = "skipped"
)

// owner is a workload whose pods Restart recreates, or why a pod has none
// that can be restarted.
type owner struct {
	kind, namespace, name string
	pods                  []string
	// skip says why the pods are not touched: the way they are owned or
	// configured; refuse why a restart would not do what it is for. Both
	// are empty for a workload that is restarted.
	skip, refuse string
}

func (w owner) String() string {
	if w.kind == "" {
		return "pod " + w.namespace + "/" + w.pods[0]
	}
	return w.kind + " " + w.namespace + "/" + w.name
}

// ErrRefused is wrapped by Restart's error when it refused to restart a
// workload.
var ErrRefused = errors.New("refused to restart")

// Restart restarts the owners of the SidecarSet's pods that opts.Which
// names; see NewCmdRestart.
func Restart(ctx context.Context, c client.Client, out io.Writer, opts RestartOptions) error {
	set, err := getSet(ctx, c, opts.Name)
	if err != nil {
		return err
	}
	if set.Spec.InjectionStrategy.Paused {
		return fmt.Errorf("%s: %w: spec.injectionStrategy.paused is true: restarted pods would not get the sidecars either", opts.Name, ErrPaused)
	}
	owners, counts, err := restartOwners(ctx, c, set, opts)
	if err != nil {
		return err
	}
	kinds := counts.kinds()
	if counts.total() == 0 {
		_, err := fmt.Fprintf(out, "%s: no %s pods\n", opts.Name, strings.Join(kinds, " or "))
		return err
	}
	for i := range owners {
		if err := check(ctx, c, set, &owners[i]); err != nil {
			return err
		}
	}
	var pending, refused []owner
	fmt.Fprintf(out, "%s: %s:\n", opts.Name, counts)
	for _, w := range owners {
		what := "to restart"
		switch {
		case w.skip != "":
			what = "not touched: " + w.skip
		case w.refuse != "":
			what = "refused: " + w.refuse
			refused = append(refused, w)
		default:
			pending = append(pending, w)
		}
		fmt.Fprintf(out, "  %s (%s): %s\n", w, strings.Join(w.pods, ", "), what)
	}
	if opts.DryRun {
		_, err := fmt.Fprintf(out, "dry run: would restart %d %s, one at a time%s\n", len(pending), plural(len(pending), "workload", "workloads"), names(pending, ": "))
		return err
	}
	lines, bar := out, newWorkloadBar(ctx, out, opts.Terminal, len(pending))
	if bar != nil {
		lines = bar.p
	}
	restarted := 0
	for i, w := range pending {
		res, err := restart(ctx, c, lines, set, w, opts)
		bar.done(i + 1)
		if err != nil {
			bar.stop()
			return fmt.Errorf("%w%s", err, names(pending[i+1:], "; not restarted: "))
		}
		switch res.refuse {
		case "":
			if res.restarted {
				restarted++
			}
		default:
			fmt.Fprintf(lines, "%s: refused: %s\n", w, res.refuse)
			w.refuse = res.refuse
			refused = append(refused, w)
		}
	}
	bar.stop()
	fmt.Fprintf(out, "%s: restarted %d %s\n", opts.Name, restarted, plural(restarted, "workload", "workloads"))
	if len(refused) > 0 {
		return fmt.Errorf("%s: %w %d %s%s (reasons above)", opts.Name, ErrRefused, len(refused), plural(len(refused), "workload", "workloads"), names(refused, ": "))
	}
	return nil
}

// heldBack says why recreating the pods of workload obj (those selector
// selects) would move one past what a SidecarSet allows, or "" when none
// would be: a new pod gets every matching set's latest revision at
// injection, so a pod on an older revision of a set that holds it there
// (paused, type NotUpdate, a partition above 0, an updateStrategy.selector
// that leaves it out) must not be recreated, nor one carrying a set whose
// injection is paused, which the new pod would lack, nor one opted out of
// injection by hand while the template does not opt out.
func heldBack(ctx context.Context, c client.Reader, obj client.Object, selector labels.Selector) (string, error) {
	namespace := obj.GetNamespace()
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return "", fmt.Errorf("list pods in %s matching %s: %w", namespace, selector, err)
	}
	templateOptsOut := podOf(obj).Annotations[v1alpha1.AnnotationInject] == "false"
	sets := map[string]*v1alpha1.SidecarSet{}
	for _, p := range pods.Items {
		if p.Annotations[v1alpha1.AnnotationInject] == "false" && !templateOptsOut && p.DeletionTimestamp == nil {
			return fmt.Sprintf("pod %s opted out of injection by hand (%s: \"false\" on the pod, not in the template): recreated, it would get the sidecars; put the annotation in the template, or restart the workload yourself",
				p.Name, v1alpha1.AnnotationInject), nil
		}
		// An unreadable record is no revision to keep.
		state, _ := revision.Decode(p.Annotations)
		for _, name := range slices.Sorted(maps.Keys(state)) {
			set, seen := sets[name]
			if !seen {
				set = &v1alpha1.SidecarSet{}
				if err := c.Get(ctx, client.ObjectKey{Name: name}, set); err != nil {
					if !apierrors.IsNotFound(err) {
						return "", fmt.Errorf("get SidecarSet %s, recorded in pod %s/%s: %w", name, p.Namespace, p.Name, err)
					}
					// Deleted: it injects nothing and holds nothing.
					set = nil
				}
				sets[name] = set
			}
			if set == nil {
				continue
			}
			if why := holds(set, p.Labels, state[name].Hash == revision.Hash(&set.Spec)); why != "" {
				return fmt.Sprintf("pod %s carries SidecarSet %s, whose %s", p.Name, name, why), nil
			}
		}
	}
	return "", nil
}

// injectionPaused reads again began, the SidecarSet as the run read it at
// its start, and says why a workload's recreated pods would not get it as
// the run judged them, or "" when they would: since the run began, its
// injection was paused, or it was deleted (or deleted and created again).
func injectionPaused(ctx context.Context, c client.Reader, began *v1alpha1.SidecarSet) (string, error) {
	name := began.Name
	set := &v1alpha1.SidecarSet{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, set); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("SidecarSet %s was deleted: recreated, the pods would not get its sidecars", name), nil
		}
		return "", fmt.Errorf("get SidecarSet %s: %w", name, err)
	}
	if set.UID != began.UID {
		return fmt.Sprintf("SidecarSet %s was deleted and created again since the run began: run the restart again", name), nil
	}
	if set.Spec.InjectionStrategy.Paused {
		return fmt.Sprintf("SidecarSet %s's injectionStrategy.paused is true: recreated, the pods would lack its sidecars", name), nil
	}
	return "", nil
}

// holds says why set keeps a pod with labels from being recreated; latest
// tells whether the pod is on the set's latest revision already.
func holds(set *v1alpha1.SidecarSet, podLabels map[string]string, latest bool) string {
	if set.Spec.InjectionStrategy.Paused {
		return "injectionStrategy.paused is true: recreated, the pod would lack its sidecars"
	}
	if latest {
		return ""
	}
	why, partition := rollout.KeptBack(set.Spec.UpdateStrategy, podLabels)
	switch {
	case why == "":
		return ""
	case partition:
		return why + ": recreated, the pod would take the latest revision, which the rollout holds back; lower it to 0 first"
	}
	return why + ": recreated, the pod would take the latest revision, which the rollout holds back"
}

// kindCounts counts the pods Restart found, by kind.
type kindCounts struct {
	which                             Which
	notUpgradable, unmanaged, skipped int
}

func (k kindCounts) total() int { return k.notUpgradable + k.unmanaged + k.skipped }

// kinds names the kinds asked for.
func (k kindCounts) kinds() []string {
	var out []string
	if k.which.NotUpgradable {
		out = append(out, kindNotUpgradable)
	}
	if k.which.Unmanaged {
		out = append(out, kindUnmanaged)
	}
	if k.which.Skipped {
		out = append(out, kindSkipped)
	}
	return out
}

// String spells the counts of the kinds asked for, e.g.
// "2 not-upgradable pods, 1 unmanaged pod".
func (k kindCounts) String() string {
	n := map[string]int{kindNotUpgradable: k.notUpgradable, kindUnmanaged: k.unmanaged, kindSkipped: k.skipped}
	var parts []string
	for _, kind := range k.kinds() {
		parts = append(parts, fmt.Sprintf("%d %s %s", n[kind], kind, plural(n[kind], "pod", "pods")))
	}
	return strings.Join(parts, ", ")
}

// names lists the workloads after prefix, or nothing when there are none.
func names(ws []owner, prefix string) string {
	if len(ws) == 0 {
		return ""
	}
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = w.String()
	}
	return prefix + strings.Join(s, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// restartOwners finds the set's pods of the kinds opts.Which names, and
// groups them by the workload to restart, sorted. Unmanaged and skipped pods
// are found reading metadata only; not-upgradable ones are classified as
// the controller does, from whole pods.
func restartOwners(ctx context.Context, c client.Reader, set *v1alpha1.SidecarSet, opts RestartOptions) ([]owner, kindCounts, error) {
	counts := kindCounts{which: opts.Which}
	byKey := map[string]*owner{}
	add := func(w owner, pod string) {
		key := w.kind + "/" + w.namespace + "/" + w.name
		if w.kind == "" {
			key += "/" + pod // ownerless pods stay one per line
		}
		if byKey[key] == nil {
			byKey[key] = &w
		}
		byKey[key].pods = append(byKey[key].pods, pod)
	}
	if opts.Which.Unmanaged || opts.Which.Skipped {
		if err := unmanagedPods(ctx, c, set, opts, &counts, add); err != nil {
			return nil, counts, err
		}
	}
	if opts.Which.NotUpgradable {
		pods, err := setPods(ctx, c, set, "", opts.ManagerNamespace)
		if err != nil {
			return nil, counts, err
		}
		for _, p := range pods {
			if p.Upgradable {
				continue
			}
			counts.notUpgradable++
			w, err := ownerOf(ctx, c, &metav1.PartialObjectMetadata{ObjectMeta: p.pod.ObjectMeta})
			if err != nil {
				return nil, counts, err
			}
			add(w, p.pod.Name)
		}
	}
	out := make([]owner, 0, len(byKey))
	for _, w := range byKey {
		slices.Sort(w.pods)
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b owner) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name),
			cmp.Compare(a.pods[0], b.pods[0]))
	})
	return out, counts, nil
}

// unmanagedPods passes to add the set's unmanaged or skipped pods, as
// opts.Which asks, with their owners, reading metadata only. Pods opted
// out are passed as not touched, with the unmanaged ones.
func unmanagedPods(ctx context.Context, c client.Reader, set *v1alpha1.SidecarSet, opts RestartOptions, counts *kindCounts, add func(owner, string)) error {
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || set.Spec.Selector == nil {
		return fmt.Errorf("%s: spec.selector: %w", set.Name, cmp.Or(err, errors.New("not set")))
	}
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := c.List(ctx, pods, client.MatchingLabelsSelector{Selector: selector},
		client.MatchingFieldsSelector{Selector: rollout.NotFinished}); err != nil {
		return fmt.Errorf("list pods matching %s: %w", selector, err)
	}
	// The pods a canary of the set selects are the canary's.
	var sets v1alpha1.SidecarSetList
	if err := c.List(ctx, &sets); err != nil {
		return fmt.Errorf("list SidecarSets for the canaries of %s: %w", set.Name, err)
	}
	canaries := make([]*v1alpha1.SidecarSet, len(sets.Items))
	for i := range sets.Items {
		canaries[i] = &sets.Items[i]
	}
	namespaces := namespaceCache{c: c}
	for i := range pods.Items {
		m := &pods.Items[i]
		ns, err := namespaces.get(ctx, m.Namespace)
		if err != nil {
			return err
		}
		var w owner
		switch rollout.MemberOf(&corev1.Pod{ObjectMeta: m.ObjectMeta}, set, canaries, ns, inject.Options{ManagerNamespace: opts.ManagerNamespace}).Membership {
		case rollout.Unmanaged, rollout.Corrupt:
			if !opts.Which.Unmanaged {
				continue
			}
			counts.unmanaged++
		case rollout.Skipped:
			if !opts.Which.Skipped {
				continue
			}
			counts.skipped++
		case rollout.OptedOut:
			if !opts.Which.Unmanaged {
				continue
			}
			counts.unmanaged++
			add(owner{namespace: m.Namespace, skip: fmt.Sprintf("opted out (%s: \"false\")", v1alpha1.AnnotationInject)}, m.Name)
			continue
		default:
			continue
		}
		if w, err = ownerOf(ctx, c, m); err != nil {
			return err
		}
		add(w, m.Name)
	}
	return nil
}

// ownerOf resolves the workload that recreates pod m: a Deployment through
// its ReplicaSet, a StatefulSet or a DaemonSet.
func ownerOf(ctx context.Context, c client.Reader, m *metav1.PartialObjectMetadata) (owner, error) {
	ref := metav1.GetControllerOf(m)
	if ref == nil {
		return owner{namespace: m.Namespace, skip: "no owner; delete and recreate it yourself"}, nil
	}
	apps := strings.HasPrefix(ref.APIVersion, appsv1.GroupName+"/")
	switch {
	case apps && (ref.Kind == "StatefulSet" || ref.Kind == "DaemonSet"):
		return owner{kind: ref.Kind, namespace: m.Namespace, name: ref.Name}, nil
	case apps && ref.Kind == "ReplicaSet":
		rs := &metav1.PartialObjectMetadata{}
		rs.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
		if err := c.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: ref.Name}, rs); err != nil {
			return owner{}, fmt.Errorf("get ReplicaSet %s/%s, owner of pod %s: %w", m.Namespace, ref.Name, m.Name, err)
		}
		if d := metav1.GetControllerOf(rs); d != nil && d.Kind == "Deployment" {
			return owner{kind: "Deployment", namespace: m.Namespace, name: d.Name}, nil
		}
		return owner{kind: "ReplicaSet", namespace: m.Namespace, name: ref.Name, skip: "a ReplicaSet without a Deployment cannot be restarted; delete its pods"}, nil
	}
	return owner{kind: ref.Kind, namespace: m.Namespace, name: ref.Name,
		skip: fmt.Sprintf("owned by a %s, which restart does not restart", ref.Kind)}, nil
}

func newWorkload(kind string) (client.Object, error) {
	switch kind {
	case "Deployment":
		return &appsv1.Deployment{}, nil
	case "StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "DaemonSet":
		return &appsv1.DaemonSet{}, nil
	}
	return nil, fmt.Errorf("cannot restart a %s", kind)
}

// check decides, before anything is restarted, whether w would be: it
// sets w.skip or w.refuse when not. Run for --dry-run and for real alike,
// so that the one lists what the other does.
func check(ctx context.Context, c client.Client, set *v1alpha1.SidecarSet, w *owner) error {
	if w.skip != "" {
		return nil
	}
	obj, err := newWorkload(w.kind)
	if err != nil {
		return err
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: w.namespace, Name: w.name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			w.skip = "deleted since its pods were listed"
			return nil
		}
		return fmt.Errorf("get %s: %w", w, err)
	}
	if w.skip = cannotRestart(obj); w.skip != "" {
		return nil
	}
	selector, err := metav1.LabelSelectorAsSelector(workloadSelector(obj))
	if err != nil {
		return fmt.Errorf("%s: spec.selector: %w", w, err)
	}
	if w.refuse, err = heldBack(ctx, c, obj, selector); err != nil || w.refuse != "" {
		return err
	}
	if w.refuse, err = wouldInject(ctx, c, set, obj); err != nil || w.refuse != "" {
		return err
	}
	budgets, err := budgetsOver(ctx, c, w.namespace, selector)
	if err != nil {
		return err
	}
	down, how := pace(obj)
	w.refuse, _ = judgeBudgets(down, how, budgets)
	return nil
}

// wouldInject dry-run creates a pod of obj's template in its namespace,
// through the apiserver and so through the webhook, and returns why the
// result lacks set, or "" when set was injected. Only the apiserver's
// answer tells: the webhook may not see the namespace at all, and the
// manager may decide on what this command cannot read.
func wouldInject(ctx context.Context, c client.Client, set *v1alpha1.SidecarSet, obj client.Object) (string, error) {
	pod := podOf(obj)
	wctx, warnings := withWarnings(ctx)
	if err := c.Create(wctx, pod, client.DryRunAll); err != nil {
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			return "", fmt.Errorf("dry-run create a pod of %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
		}
		return fmt.Sprintf("the apiserver refused a dry-run pod of its template, so its new pods would be refused too: %v", err), nil
	}
	if slices.Contains(strings.Split(pod.Annotations[v1alpha1.AnnotationInjected], ","), set.Name) {
		return "", nil
	}
	var why []string
	for _, w := range *warnings {
		if strings.Contains(w, set.Name) {
			why = append(why, w)
		}
	}
	if len(why) > 0 {
		return fmt.Sprintf("the webhook skips SidecarSet %s for a dry-run pod of its template: %s", set.Name, strings.Join(why, "; ")), nil
	}
	return fmt.Sprintf("a dry-run pod of its template came back without SidecarSet %s, and no warning said why: the webhook does not see namespace %s (its namespaceSelector), or is not answering (kubectl sidecarset preflight -n %s)",
		set.Name, obj.GetNamespace(), obj.GetNamespace()), nil
}

// podOf is a pod as obj's controller would create it from its template, as
// far as admission can tell: a StatefulSet's controller adds a volume for
// each volumeClaimTemplate.
func podOf(obj client.Object) *corev1.Pod {
	var tmpl *corev1.PodTemplateSpec
	switch o := obj.(type) {
	case *appsv1.Deployment:
		tmpl = &o.Spec.Template
	case *appsv1.StatefulSet:
		tmpl = &o.Spec.Template
	case *appsv1.DaemonSet:
		tmpl = &o.Spec.Template
	}
	t := tmpl.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: obj.GetName() + "-", Namespace: obj.GetNamespace(), Labels: t.Labels, Annotations: t.Annotations},
		Spec:       t.Spec,
	}
	if sts, ok := obj.(*appsv1.StatefulSet); ok {
		for _, claim := range sts.Spec.VolumeClaimTemplates {
			if slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == claim.Name }) {
				continue
			}
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name + "-" + sts.Name + "-0"}}})
		}
	}
	return pod
}

// restarted is how restart ended for one workload that did not fail.
type restarted struct {
	restarted bool
	// refuse says why it was not restarted after all.
	refuse string
}

// restart restarts one workload: budgets first, then the annotation, then
// the rollout's end, then a look at whether the new pods got the sidecars.
// A workload deleted, or changed so that a restart would not roll it, since
// it was checked is left alone, saying so; a rollout not finished within
// the timeout is an error wrapping ErrTimeout that says it was restarted.
func restart(ctx context.Context, c client.Client, out io.Writer, set *v1alpha1.SidecarSet, w owner, opts RestartOptions) (restarted, error) {
	obj, err := newWorkload(w.kind)
	if err != nil {
		return restarted{}, err
	}
	key := types.NamespacedName{Namespace: w.namespace, Name: w.name}
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(out, "%s: deleted since it was checked; skipped\n", w)
			return restarted{}, nil
		}
		return restarted{}, fmt.Errorf("get %s: %w", w, err)
	}
	if why := cannotRestart(obj); why != "" {
		fmt.Fprintf(out, "%s: not restarted: %s\n", w, why)
		return restarted{}, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(workloadSelector(obj))
	if err != nil {
		return restarted{}, fmt.Errorf("%s: spec.selector: %w", w, err)
	}
	// The sets may have changed since the check (a rollout paused): the
	// pods' recorded sets, and this one, which pods without its record
	// (unmanaged) do not name. Checked before the wait for budgets, so as
	// not to wait for nothing, and again after it, which can take up to
	// --timeout, just before the write.
	held := func() (string, error) {
		if refuse, err := injectionPaused(ctx, c, set); err != nil || refuse != "" {
			return refuse, err
		}
		return heldBack(ctx, c, obj, selector)
	}
	if refuse, err := held(); err != nil || refuse != "" {
		return restarted{refuse: refuse}, err
	}
	if refuse, err := waitBudgets(ctx, c, out, w, obj, selector, opts); err != nil || refuse != "" {
		return restarted{refuse: refuse}, err
	}
	if refuse, err := held(); err != nil || refuse != "" {
		return restarted{refuse: refuse}, err
	}

	now := time.Now().Format(time.RFC3339)
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{AnnotationRestartedAt: now}}}}})
	if err != nil {
		return restarted{}, fmt.Errorf("encode patch: %w", err)
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(out, "%s: deleted since it was checked; skipped\n", w)
			return restarted{}, nil
		}
		return restarted{}, fmt.Errorf("restart %s (patch %s): %w", w, AnnotationRestartedAt, err)
	}
	fmt.Fprintf(out, "%s: restarting (%s=%s)\n", w, AnnotationRestartedAt, now)

	gen := obj.GetGeneration()
	deadline := time.Now().Add(opts.Timeout)
	var last string
	for {
		if err := c.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				fmt.Fprintf(out, "%s: deleted during its restart; going on with the others\n", w)
				return restarted{}, nil
			}
			return restarted{}, fmt.Errorf("%s: restarted, but reading its rollout failed: %w", w, err)
		}
		done, msg, err := rolledOut(obj, gen)
		if err != nil {
			return restarted{}, fmt.Errorf("%s: restarted, but %w", w, err)
		}
		if msg != last {
			fmt.Fprintf(out, "%s: %s\n", w, msg)
			last = msg
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			return restarted{}, fmt.Errorf("%s: %w: restarted (%s=%s), but its rollout did not finish within --timeout %s: %s",
				w, ErrTimeout, AnnotationRestartedAt, now, opts.Timeout, msg)
		}
		if err := sleep(ctx, opts.Interval); err != nil {
			return restarted{}, fmt.Errorf("%s: restarted, rollout not followed to its end: %w", w, err)
		}
	}
	return restarted{restarted: true}, reportPods(ctx, c, out, set, w, selector, opts)
}

// cannotRestart says why a restart annotation would not roll obj's pods.
func cannotRestart(obj client.Object) string {
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		if o.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
			return "updateStrategy OnDelete: its pods change only when deleted"
		}
		if ru := o.Spec.UpdateStrategy.RollingUpdate; ru != nil && ptr.Deref(ru.Partition, 0) > 0 {
			return fmt.Sprintf("rollingUpdate.partition %d: its pods with a lower ordinal would not restart; set it to 0 first", *ru.Partition)
		}
	case *appsv1.DaemonSet:
		if o.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
			return "updateStrategy OnDelete: its pods change only when deleted"
		}
	case *appsv1.Deployment:
		if o.Spec.Paused {
			return "the Deployment is paused: it would not roll its pods"
		}
	}
	return ""
}

func workloadSelector(obj client.Object) *metav1.LabelSelector {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return o.Spec.Selector
	case *appsv1.StatefulSet:
		return o.Spec.Selector
	case *appsv1.DaemonSet:
		return o.Spec.Selector
	}
	return nil
}

// pace returns how many of obj's pods its own rolling update takes down at
// once, and how that follows from its spec, as its controller computes it:
// a Deployment rounds maxUnavailable (default 25%) down and takes 1 when
// that and maxSurge are both 0, Recreate takes every replica; a StatefulSet
// takes maxUnavailable (default 1, rounded up, at least 1); a DaemonSet
// maxUnavailable (default 1, rounded up) of its scheduled pods, and none
// with a maxSurge and maxUnavailable 0.
//
// Worked cases:
//
//	Deployment 8 replicas, maxUnavailable 25%, maxSurge 25% → 2
//	Deployment 3 replicas, maxUnavailable 25%, maxSurge 25% → 0 (surge first)
//	Deployment 3 replicas, maxUnavailable 0, maxSurge 0     → 1
//	Deployment 5 replicas, Recreate                         → 5
//	StatefulSet 6 replicas, default                         → 1
//	StatefulSet 6 replicas, maxUnavailable 50%              → 3
//	DaemonSet 4 scheduled, maxUnavailable 25%               → 1
//	DaemonSet 4 scheduled, maxSurge 1, maxUnavailable 0     → 0
func pace(obj client.Object) (int32, string) {
	scaled := func(v *intstr.IntOrString, def intstr.IntOrString, n int32, up bool) int32 {
		if v == nil {
			v = &def
		}
		x, err := intstr.GetScaledValueFromIntOrPercent(v, int(n), up)
		if err != nil {
			// Validation refuses such a value; assume the worst.
			return n
		}
		return int32(x)
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		n := ptrOr(o.Spec.Replicas, 1)
		if o.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
			return n, fmt.Sprintf("strategy Recreate, %d replicas", n)
		}
		var mu, ms *intstr.IntOrString
		if ru := o.Spec.Strategy.RollingUpdate; ru != nil {
			mu, ms = ru.MaxUnavailable, ru.MaxSurge
		}
		down := scaled(mu, intstr.FromString("25%"), n, false)
		if down == 0 && scaled(ms, intstr.FromString("25%"), n, true) == 0 {
			down = 1
		}
		return min(down, n), fmt.Sprintf("maxUnavailable %s of %d replicas", intOrPercent(mu, "25%"), n)
	case *appsv1.StatefulSet:
		n := ptrOr(o.Spec.Replicas, 1)
		var mu *intstr.IntOrString
		if ru := o.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			mu = ru.MaxUnavailable
		}
		return min(max(scaled(mu, intstr.FromInt32(1), n, true), 1), n), fmt.Sprintf("maxUnavailable %s of %d replicas", intOrPercent(mu, "1"), n)
	case *appsv1.DaemonSet:
		n := o.Status.DesiredNumberScheduled
		var mu, ms *intstr.IntOrString
		if ru := o.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			mu, ms = ru.MaxUnavailable, ru.MaxSurge
		}
		down := scaled(mu, intstr.FromInt32(1), n, true)
		if down == 0 && scaled(ms, intstr.FromInt32(0), n, true) == 0 {
			down = 1
		}
		return min(down, n), fmt.Sprintf("maxUnavailable %s of %d scheduled pods", intOrPercent(mu, "1"), n)
	}
	return 1, "one pod at a time"
}

// budget is what a PodDisruptionBudget over a workload's pods allows.
type budget struct {
	name string
	// observed: the disruption controller has evaluated the current spec.
	observed bool
	// allowed now (status.disruptionsAllowed), and at most: with every
	// expected pod healthy (status.expectedPods - status.desiredHealthy).
	allowed, expected, desiredHealthy int32
}

// judgeBudgets decides, for a rollout that takes down pods at once (how
// says why), whether the budgets refuse it (a reason naming the numbers),
// make it wait (what for), or let it go (both empty). A budget never allows
// more than its expected pods minus its desired healthy ones, so a rollout
// faster than that would break it whatever the wait; one that allows fewer
// now than the rollout takes is waited on.
//
// Worked cases, a budget over 8 pods with maxUnavailable 1 (7 desired
// healthy):
//
//	down 2 (maxUnavailable 25% of 8)            → refuse: 2 at once, the budget allows at most 1
//	down 1, disruptionsAllowed 1                → go
//	down 1, disruptionsAllowed 0 (a pod down)   → wait
//	down 0 (surge only)                         → go, whatever the budget
//	budget not yet evaluated                    → wait
func judgeBudgets(down int32, how string, budgets []budget) (refuse, wait string) {
	if down == 0 {
		return "", ""
	}
	var waits []string
	for _, b := range budgets {
		switch ceiling := b.expected - b.desiredHealthy; {
		case !b.observed:
			waits = append(waits, fmt.Sprintf("PodDisruptionBudget %s is not evaluated yet (status.observedGeneration behind)", b.name))
		case ceiling < down:
			return fmt.Sprintf("its rollout takes up to %d %s down at once (%s), more than PodDisruptionBudget %s ever allows (%d: %d expected pods, %d desired healthy); lower the workload's maxUnavailable to %d, or loosen the budget",
				down, plural(int(down), "pod", "pods"), how, b.name, max(ceiling, 0), b.expected, b.desiredHealthy, max(ceiling, 0)), ""
		case b.allowed < down:
			waits = append(waits, fmt.Sprintf("PodDisruptionBudget %s allows %d %s now (status.disruptionsAllowed), the rollout takes up to %d at once",
				b.name, b.allowed, plural(int(b.allowed), "disruption", "disruptions"), down))
		}
	}
	return "", strings.Join(waits, "; ")
}

// waitBudgets waits until the PodDisruptionBudgets over the workload's pods
// allow its rollout (judgeBudgets), and returns why they refuse it if they
// do. Running out of time is an error wrapping ErrTimeout.
func waitBudgets(ctx context.Context, c client.Reader, out io.Writer, w owner, obj client.Object, selector labels.Selector, opts RestartOptions) (string, error) {
	deadline := time.Now().Add(opts.Timeout)
	down, how := pace(obj)
	var last string
	for {
		budgets, err := budgetsOver(ctx, c, w.namespace, selector)
		if err != nil {
			return "", err
		}
		refuse, wait := judgeBudgets(down, how, budgets)
		if refuse != "" || wait == "" {
			return refuse, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s: %w: not restarted: waited --timeout %s for its PodDisruptionBudgets: %s", w, ErrTimeout, opts.Timeout, wait)
		}
		if wait != last {
			fmt.Fprintf(out, "%s: waiting: %s\n", w, wait)
			last = wait
		}
		if err := sleep(ctx, opts.Interval); err != nil {
			return "", err
		}
	}
}

// budgetsOver returns the budgets in namespace over any of the pods
// selector selects, each allowing what its status allows less the pods a
// SidecarSet's write has down that its status does not show yet.
func budgetsOver(ctx context.Context, c client.Reader, namespace string, selector labels.Selector) ([]budget, error) {
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.List(ctx, &pdbs, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list PodDisruptionBudgets in %s: %w", namespace, err)
	}
	if len(pdbs.Items) == 0 {
		return nil, nil
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list pods in %s: %w", namespace, err)
	}
	// As the controller counts them (rollout.Disruptions).
	var sets v1alpha1.SidecarSetList
	if err := c.List(ctx, &sets); err != nil {
		return nil, fmt.Errorf("list SidecarSets: %w", err)
	}
	all := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		all[i] = &pods.Items[i]
	}
	disrupted := rollout.NewDisruptions(all, rollout.SetsOf(sets.Items), time.Now())
	var out []budget
	for _, pdb := range pdbs.Items {
		// nil selects nothing, {} every pod of the namespace, as the
		// disruption controller reads policy/v1; a broken one is ignored.
		sel, ok := rollout.BudgetSelector(pdb.Spec.Selector)
		if !ok {
			continue
		}
		covers := slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
			return sel.Matches(labels.Set(p.Labels)) && selector.Matches(labels.Set(p.Labels))
		})
		if !covers {
			continue
		}
		st := pdb.Status
		out = append(out, budget{name: pdb.Namespace + "/" + pdb.Name, observed: st.ObservedGeneration >= pdb.Generation,
			allowed: st.DisruptionsAllowed - disrupted.Spent(sel), expected: st.ExpectedPods, desiredHealthy: st.DesiredHealthy})
	}
	return out, nil
}

// rolledOut judges a workload's rollout after a change that made
// generation gen, as `kubectl rollout status` does: the controller observed
// it, every replica is updated, no old one is left, and the updated ones are
// available (ready, for a StatefulSet).
func rolledOut(obj client.Object, gen int64) (bool, string, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		st := o.Status
		want := ptrOr(o.Spec.Replicas, 1)
		if st.ObservedGeneration < gen {
			return false, "waiting for the Deployment controller", nil
		}
		for _, c := range st.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
				return false, "", fmt.Errorf("rollout exceeded its progress deadline: %s", c.Message)
			}
		}
		switch {
		case st.UpdatedReplicas < want:
			return false, fmt.Sprintf("%d of %d new replicas updated", st.UpdatedReplicas, want), nil
		case st.Replicas > st.UpdatedReplicas:
			return false, fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas), nil
		case st.AvailableReplicas < st.UpdatedReplicas:
			return false, fmt.Sprintf("%d of %d updated replicas available", st.AvailableReplicas, st.UpdatedReplicas), nil
		}
		return true, fmt.Sprintf("rolled out: %d of %d replicas updated and available", st.AvailableReplicas, want), nil
	case *appsv1.StatefulSet:
		st := o.Status
		want := ptrOr(o.Spec.Replicas, 1)
		if st.ObservedGeneration < gen {
			return false, "waiting for the StatefulSet controller", nil
		}
		if st.ReadyReplicas < want {
			return false, fmt.Sprintf("%d of %d replicas ready", st.ReadyReplicas, want), nil
		}
		if ru := o.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil && *ru.Partition > 0 {
			if st.UpdatedReplicas < want-*ru.Partition {
				return false, fmt.Sprintf("%d of %d replicas above the partition updated", st.UpdatedReplicas, want-*ru.Partition), nil
			}
			return true, fmt.Sprintf("rolled out: %d replicas above the partition updated", st.UpdatedReplicas), nil
		}
		if st.UpdateRevision != st.CurrentRevision || st.UpdatedReplicas < want {
			return false, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want), nil
		}
		return true, fmt.Sprintf("rolled out: %d of %d replicas updated and ready", st.UpdatedReplicas, want), nil
	case *appsv1.DaemonSet:
		st := o.Status
		if st.ObservedGeneration < gen {
			return false, "waiting for the DaemonSet controller", nil
		}
		if st.UpdatedNumberScheduled < st.DesiredNumberScheduled {
			return false, fmt.Sprintf("%d of %d pods updated", st.UpdatedNumberScheduled, st.DesiredNumberScheduled), nil
		}
		if st.NumberAvailable < st.DesiredNumberScheduled {
			return false, fmt.Sprintf("%d of %d updated pods available", st.NumberAvailable, st.DesiredNumberScheduled), nil
		}
		return true, fmt.Sprintf("rolled out: %d of %d pods updated and available", st.NumberAvailable, st.DesiredNumberScheduled), nil
	}
	return false, "", fmt.Errorf("cannot judge the rollout of a %T", obj)
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// reportPods reads the workload's pods back after its rollout and warns
// about those still lacking the set's record, and, when not-upgradable pods
// were recreated, those still not upgradable to the latest revision: the
// webhook is not injecting them, or injects something else.
func reportPods(ctx context.Context, c client.Reader, out io.Writer, set *v1alpha1.SidecarSet, w owner, selector labels.Selector, opts RestartOptions) error {
	which := opts.Which
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(w.namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return fmt.Errorf("list pods of %s: %w", w, err)
	}
	latest, err := latestOf(ctx, c, set, opts.ManagerNamespace)
	if err != nil {
		return err
	}
	var without, stuck []string
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		n++
		// Another set's unreadable entry does not matter here.
		state, _ := revision.Decode(p.Annotations)
		rec, ok := state[set.Name]
		switch {
		case !ok:
			without = append(without, p.Name)
		case which.NotUpgradable && !rollout.Classify(p, rec, latest).Upgradable:
			stuck = append(stuck, p.Name)
		}
	}
	if len(without) > 0 {
		fmt.Fprintf(out, "%s: warning: %d of %d pods still lack SidecarSet %s (%s): is the webhook answering? try `kubectl sidecarset preflight`\n",
			w, len(without), n, set.Name, strings.Join(without, ", "))
	}
	if len(stuck) > 0 {
		fmt.Fprintf(out, "%s: warning: %d of %d pods still cannot take revision %s in place (%s): has the SidecarSet changed since? see `kubectl sidecarset pods %s`\n",
			w, len(stuck), n, latest.Name, strings.Join(stuck, ", "), set.Name)
	}
	if len(without)+len(stuck) > 0 {
		return nil
	}
	if which.NotUpgradable {
		_, err := fmt.Fprintf(out, "%s: all %d pods carry SidecarSet %s, upgradable in place to revision %s\n", w, n, set.Name, latest.Name)
		return err
	}
	_, err = fmt.Fprintf(out, "%s: all %d pods carry SidecarSet %s\n", w, n, set.Name)
	return err
}

// workloadBar counts, on a terminal, the workloads a run is done with,
// below the run's lines, which go through p. A nil workloadBar draws
// nothing.
type workloadBar struct {
	p   *mpb.Progress
	bar *mpb.Bar
}

func newWorkloadBar(ctx context.Context, out io.Writer, terminal bool, total int) *workloadBar {
	if !terminal || total == 0 {
		return nil
	}
	// As newBarRenderer: out may be a wrapper mpb cannot see through.
	p := mpb.NewWithContext(ctx, mpb.WithOutput(out), mpb.ForceTTY(), mpb.WithAutoRefresh(), mpb.WithWidth(lineWidth))
	bar := p.New(int64(total), mpb.BarStyle().Lbound("[").Filler("=").Tip(">").Padding("-").Rbound("]"),
		mpb.BarWidth(barWidth),
		mpb.PrependDecorators(decor.Name("restart", decor.WCSyncSpaceR)),
		mpb.AppendDecorators(decor.CountersNoUnit(" %d/%d workloads")),
	)
	return &workloadBar{p: p, bar: bar}
}

func (b *workloadBar) done(n int) {
	if b != nil {
		b.bar.SetCurrent(int64(n))
	}
}

// stop leaves the bar as it is on screen and waits for its last redraw.
func (b *workloadBar) stop() {
	if b == nil {
		return
	}
	if !b.bar.Completed() {
		b.bar.Abort(false)
	}
	b.p.Wait()
}
