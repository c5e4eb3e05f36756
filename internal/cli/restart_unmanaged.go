package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// AnnotationRestartedAt is what `kubectl rollout restart` writes into a pod
// template to roll a workload's pods.
const AnnotationRestartedAt = "kubectl.kubernetes.io/restartedAt"

// NewCmdRestartUnmanaged returns `restart-unmanaged NAME`.
func NewCmdRestartUnmanaged(o *Options) *cobra.Command {
	opts := RestartOptions{Timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "restart-unmanaged NAME [--dry-run]",
		Short: "Rolling-restart the workloads of pods that match a SidecarSet but lack its sidecars",
		Long: `Find the pods the SidecarSet's selectors match that carry no record of it
(status.unmanagedPods: created before the SidecarSet, or while the webhook was
down), and restart their Deployments, StatefulSets and DaemonSets so the new
pods get the sidecars. Owners are restarted one at a time, as
kubectl rollout restart does (the kubectl.kubernetes.io/restartedAt annotation
on the pod template), and each rollout must finish before the next starts.

Before each restart, every PodDisruptionBudget over the workload's pods must
allow a disruption (status.disruptionsAllowed > 0); it is waited for up to
--timeout, then the command stops. Pods without an owner, with another kind of
owner (Job, a ReplicaSet without a Deployment, ...), or opted out with
sidecarset.dev/inject: "false" are listed and not touched. Pods the webhook
could not inject the SidecarSet into (status.skippedPods) are not unmanaged:
a new pod would be skipped for the same reason, so they are left alone.`,
		Example: `  # What would be restarted?
  kubectl sidecarset restart-unmanaged mysql-exporter --dry-run

  # Restart, allowing each rollout 10 minutes
  kubectl sidecarset restart-unmanaged mysql-exporter --timeout 10m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Timeout <= 0 {
				return fmt.Errorf("--timeout %s: must be positive", opts.Timeout)
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			opts.Name = args[0]
			opts.ManagerNamespace = o.ManagerNamespace
			opts.Interval = o.PollInterval
			return RestartUnmanaged(cmd.Context(), c, o.Out, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "Only list the unmanaged pods and the workloads that would be restarted")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", opts.Timeout, "How long to wait for a PodDisruptionBudget to allow a disruption, and for each rollout")
	return cmd
}

// RestartOptions say what RestartUnmanaged restarts and how long it waits.
type RestartOptions struct {
	Name             string
	DryRun           bool
	ManagerNamespace string
	Timeout          time.Duration
	Interval         time.Duration
}

// owner is a workload whose pods lack the SidecarSet, or why a pod has none
// that can be restarted.
type owner struct {
	kind, namespace, name string
	pods                  []string
	// skip says why the pods are not touched; empty for a workload that is
	// restarted.
	skip string
}

func (w owner) String() string {
	if w.kind == "" {
		return "pod " + w.namespace + "/" + w.pods[0]
	}
	return w.kind + " " + w.namespace + "/" + w.name
}

// RestartUnmanaged restarts the owners of the SidecarSet's unmanaged pods;
// see NewCmdRestartUnmanaged.
func RestartUnmanaged(ctx context.Context, c client.Client, out io.Writer, opts RestartOptions) error {
	set, err := getSet(ctx, c, opts.Name)
	if err != nil {
		return err
	}
	if set.Spec.InjectionStrategy.Paused {
		return fmt.Errorf("%s: spec.injectionStrategy.paused is true: restarted pods would not get the sidecars either", opts.Name)
	}
	owners, err := unmanagedOwners(ctx, c, set, opts.ManagerNamespace)
	if err != nil {
		return err
	}
	var pending []owner
	count := 0
	for _, w := range owners {
		count += len(w.pods)
		if w.skip == "" {
			pending = append(pending, w)
		}
	}
	if count == 0 {
		_, err := fmt.Fprintf(out, "%s: no unmanaged pods\n", opts.Name)
		return err
	}
	fmt.Fprintf(out, "%s: %d unmanaged %s:\n", opts.Name, count, plural(count, "pod", "pods"))
	for _, w := range owners {
		what := "to restart"
		if w.skip != "" {
			what = "not touched: " + w.skip
		}
		fmt.Fprintf(out, "  %s (%s): %s\n", w, strings.Join(w.pods, ", "), what)
	}
	if opts.DryRun {
		_, err := fmt.Fprintf(out, "dry run: would restart %d %s, one at a time\n", len(pending), plural(len(pending), "workload", "workloads"))
		return err
	}
	restarted := 0
	for i, w := range pending {
		done, err := restart(ctx, c, out, set, w, opts)
		if err != nil {
			left := make([]string, 0, len(pending)-i)
			for _, l := range pending[i:] {
				left = append(left, l.String())
			}
			return fmt.Errorf("%w; not restarted: %s", err, strings.Join(left, ", "))
		}
		if done {
			restarted++
		}
	}
	_, err = fmt.Fprintf(out, "%s: restarted %d %s\n", opts.Name, restarted, plural(restarted, "workload", "workloads"))
	return err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// unmanagedOwners finds the set's unmanaged pods, reading metadata only,
// and groups them by the workload to restart, sorted.
func unmanagedOwners(ctx context.Context, c client.Reader, set *v1alpha1.SidecarSet, managerNamespace string) ([]owner, error) {
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || set.Spec.Selector == nil {
		return nil, fmt.Errorf("%s: spec.selector: %v", set.Name, cmp.Or(err, errors.New("not set")))
	}
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := c.List(ctx, pods, client.MatchingLabelsSelector{Selector: selector},
		client.MatchingFieldsSelector{Selector: rollout.NotFinished}); err != nil {
		return nil, fmt.Errorf("list pods matching %s: %w", selector, err)
	}
	namespaces := namespaceCache{c: c}
	byKey := map[string]*owner{}
	for i := range pods.Items {
		m := &pods.Items[i]
		ns, err := namespaces.get(ctx, m.Namespace)
		if err != nil {
			return nil, err
		}
		var w owner
		switch rollout.MemberOf(&corev1.Pod{ObjectMeta: m.ObjectMeta}, set, ns, inject.Options{ManagerNamespace: managerNamespace}).Membership {
		case rollout.Unmanaged, rollout.Corrupt:
			if w, err = ownerOf(ctx, c, m); err != nil {
				return nil, err
			}
		case rollout.OptedOut:
			w = owner{namespace: m.Namespace, skip: fmt.Sprintf("opted out (%s: \"false\")", v1alpha1.AnnotationInject)}
		default:
			continue
		}
		key := w.kind + "/" + w.namespace + "/" + w.name
		if w.kind == "" {
			key += "/" + m.Name // ownerless pods stay one per line
		}
		if byKey[key] == nil {
			byKey[key] = &w
		}
		byKey[key].pods = append(byKey[key].pods, m.Name)
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
	return out, nil
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
		skip: fmt.Sprintf("owned by a %s, which restart-unmanaged does not restart", ref.Kind)}, nil
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

// restart restarts one workload: budgets first, then the annotation, then
// the rollout's end, then a look at whether the new pods got the sidecars.
// It reports whether it restarted the workload: one whose update strategy
// ignores the annotation is left alone.
func restart(ctx context.Context, c client.Client, out io.Writer, set *v1alpha1.SidecarSet, w owner, opts RestartOptions) (bool, error) {
	obj, err := newWorkload(w.kind)
	if err != nil {
		return false, err
	}
	key := types.NamespacedName{Namespace: w.namespace, Name: w.name}
	if err := c.Get(ctx, key, obj); err != nil {
		return false, fmt.Errorf("get %s: %w", w, err)
	}
	if why := cannotRestart(obj); why != "" {
		fmt.Fprintf(out, "%s: not restarted: %s\n", w, why)
		return false, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(workloadSelector(obj))
	if err != nil {
		return false, fmt.Errorf("%s: spec.selector: %w", w, err)
	}
	if err := waitBudgets(ctx, c, out, w, selector, opts); err != nil {
		return false, err
	}

	now := time.Now().Format(time.RFC3339)
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{AnnotationRestartedAt: now}}}}})
	if err != nil {
		return false, fmt.Errorf("encode patch: %w", err)
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return false, fmt.Errorf("restart %s (patch %s): %w", w, AnnotationRestartedAt, err)
	}
	fmt.Fprintf(out, "%s: restarting (%s=%s)\n", w, AnnotationRestartedAt, now)

	gen := obj.GetGeneration()
	deadline := time.Now().Add(opts.Timeout)
	var last string
	for {
		if err := c.Get(ctx, key, obj); err != nil {
			return false, fmt.Errorf("get %s: %w", w, err)
		}
		done, msg, err := rolledOut(obj, gen)
		if err != nil {
			return false, fmt.Errorf("%s: %w", w, err)
		}
		if msg != last {
			fmt.Fprintf(out, "%s: %s\n", w, msg)
			last = msg
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%s: rollout not finished within --timeout %s: %s", w, opts.Timeout, msg)
		}
		if err := sleep(ctx, opts.Interval); err != nil {
			return false, err
		}
	}
	return true, reportStillUnmanaged(ctx, c, out, set, w, selector)
}

// cannotRestart says why a restart annotation would not roll obj's pods.
func cannotRestart(obj client.Object) string {
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		if o.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
			return "updateStrategy OnDelete: its pods change only when deleted"
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

// waitBudgets waits until every PodDisruptionBudget that selects one of the
// workload's pods allows a disruption: a restart replaces pods, which the
// budget is there to pace.
func waitBudgets(ctx context.Context, c client.Reader, out io.Writer, w owner, selector labels.Selector, opts RestartOptions) error {
	deadline := time.Now().Add(opts.Timeout)
	var last string
	for {
		blocking, err := blockingBudgets(ctx, c, w.namespace, selector)
		if err != nil {
			return err
		}
		if len(blocking) == 0 {
			return nil
		}
		msg := fmt.Sprintf("PodDisruptionBudget %s allows no disruption (status.disruptionsAllowed 0)", strings.Join(blocking, ", "))
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: refusing to restart: %s for --timeout %s", w, msg, opts.Timeout)
		}
		if msg != last {
			fmt.Fprintf(out, "%s: waiting: %s\n", w, msg)
			last = msg
		}
		if err := sleep(ctx, opts.Interval); err != nil {
			return err
		}
	}
}

// blockingBudgets names the budgets over the pods selector selects in
// namespace that allow no disruption now.
func blockingBudgets(ctx context.Context, c client.Reader, namespace string, selector labels.Selector) ([]string, error) {
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.List(ctx, &pdbs, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list PodDisruptionBudgets in %s: %w", namespace, err)
	}
	if len(pdbs.Items) == 0 {
		return nil, nil
	}
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("list pods in %s matching %s: %w", namespace, selector, err)
	}
	var blocking []string
	for _, pdb := range pdbs.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		// The disruption controller ignores a budget with an empty or
		// broken selector, and so does this check.
		if err != nil || sel.Empty() {
			continue
		}
		covers := slices.ContainsFunc(pods.Items, func(p metav1.PartialObjectMetadata) bool { return sel.Matches(labels.Set(p.Labels)) })
		if covers && pdb.Status.DisruptionsAllowed <= 0 {
			blocking = append(blocking, pdb.Namespace+"/"+pdb.Name)
		}
	}
	return blocking, nil
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

// reportStillUnmanaged says whether the workload's pods now carry the
// set's record: if not, the webhook is not injecting them.
func reportStillUnmanaged(ctx context.Context, c client.Reader, out io.Writer, set *v1alpha1.SidecarSet, w owner, selector labels.Selector) error {
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := c.List(ctx, pods, client.InNamespace(w.namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return fmt.Errorf("list pods of %s: %w", w, err)
	}
	var without []string
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		n++
		// Another set's unreadable entry does not matter here.
		state, _ := revision.Decode(p.Annotations)
		if _, ok := state[set.Name]; !ok {
			without = append(without, p.Name)
		}
	}
	if len(without) > 0 {
		_, err := fmt.Fprintf(out, "%s: warning: %d of %d pods still lack SidecarSet %s (%s): is the webhook answering? try `kubectl sidecarset preflight`\n",
			w, len(without), n, set.Name, strings.Join(without, ", "))
		return err
	}
	_, err := fmt.Fprintf(out, "%s: all %d pods carry SidecarSet %s\n", w, n, set.Name)
	return err
}
