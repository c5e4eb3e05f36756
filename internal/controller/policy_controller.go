package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/policy"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/scope"
	"github.com/sidecarset/sidecarset/internal/status"
)

// AnnotationPolicyHash on a SidecarSet's MutatingAdmissionPolicy and binding
// is the hash of what the controller compiled them from. The apiserver
// defaults fields of both, so the objects read back never equal the
// compiled ones; the hash says whether they are in step.
const AnnotationPolicyHash = "sidecarset.dev/policy-hash"

// PolicyReconciler keeps every SidecarSet's MutatingAdmissionPolicy and
// binding equal to what policy.Compile makes of the revision new pods get,
// removes them when the set is deleted, paused or left to the webhook, and
// removes those labelled as the policy of a set that does not exist. It
// writes status.injection, which the webhook reads to leave a set to its
// policy (status.Injection decides the handover).
type PolicyReconciler struct {
	// Client reads from the manager's cache (the policies and bindings
	// labelled policy.LabelSet only) and writes to the apiserver.
	Client client.Client
	// Namespace is the manager's namespace: never injected; revisions are
	// read there.
	Namespace string
	// Mode is the manager's --injection, resolved against the apiserver.
	Mode status.Mode
	// Served: the apiserver serves MutatingAdmissionPolicy v1. Without it
	// no policy is read, written or watched.
	Served bool
	// Configuration and Webhook name the MutatingWebhookConfiguration and
	// its pod webhook, whose excluded namespaces the policies keep out too.
	// Empty: only the system and the manager's namespaces are kept out.
	Configuration string
	Webhook       string
	// WebhookScope, when set, is synced before a set's policy is removed
	// for the webhook to inject it again.
	WebhookScope *WebhookScope
	Clock        clock.PassiveClock

	mu sync.Mutex
	// inStep is, by set name, the hash its policy and binding were last
	// seen in step with, and since when: a policy just written waits for
	// Handover before the webhook leaves the set to it.
	inStep map[string]inStep
}

type inStep struct {
	hash  string
	since time.Time
}

// SetupWithManager registers the controller: SidecarSets (their status too,
// which says whether a stalled rollout falls back to its completed
// revision), and the policies and bindings labelled as a set's.
func (r *PolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.inStep = map[string]inStep{}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.SidecarSet{}).
		// A canary created or deleted moves its base to or from the webhook.
		Watches(&v1alpha1.SidecarSet{}, handler.EnqueueRequestsFromMapFunc(baseOfCanary)).
		Named("sidecarset-policy")
	if r.Served {
		b = b.Watches(&admissionregistrationv1.MutatingAdmissionPolicy{}, handler.EnqueueRequestsFromMapFunc(setOfPolicy)).
			Watches(&admissionregistrationv1.MutatingAdmissionPolicyBinding{}, handler.EnqueueRequestsFromMapFunc(setOfPolicy))
	}
	return b.Complete(r)
}

// baseOfCanary maps a canary to its base (inject.CanaryOf).
func baseOfCanary(_ context.Context, obj client.Object) []reconcile.Request {
	set, ok := obj.(*v1alpha1.SidecarSet)
	if !ok || inject.CanaryOf(set) == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: inject.CanaryOf(set)}}}
}

// setOfPolicy maps a policy or binding to the set its label names, whether
// that set exists or not.
func setOfPolicy(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[policy.LabelSet]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
}

// Reconcile keeps one SidecarSet's policy in step and its status.injection
// current.
func (r *PolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	set := &v1alpha1.SidecarSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, set); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get SidecarSet: %w", err)
		}
		// Deleted, or never there: what is labelled as its policy goes.
		// Owner references would collect a deleted set's, but not one
		// whose owner reference was lost.
		r.mu.Lock()
		delete(r.inStep, req.Name)
		r.mu.Unlock()
		return ctrl.Result{}, r.remove(ctx, req.Name)
	}
	if set.DeletionTimestamp != nil {
		// Being deleted: the garbage collector takes its policy with it.
		return ctrl.Result{}, nil
	}

	in := status.InjectionInput{
		Mode:       r.Mode,
		Generation: set.Generation,
		Paused:     set.Spec.InjectionStrategy.Paused,
		Policy:     policy.Name(set.Name),
		Previous:   set.Status.Injection,
		Now:        r.Clock.Now(),
	}
	var compiled policy.Compiled
	var hash string
	if r.Mode == status.ModePolicy && !in.Paused {
		var err error
		compiled, hash, err = r.compile(ctx, set)
		var unsupported *policy.Unsupported
		switch {
		case errors.As(err, &unsupported):
			in.Unsupported = unsupported.Reason
		case err != nil:
			return ctrl.Result{}, err
		default:
			in.InStep, in.InStepSince, err = r.inStepSince(ctx, set.Name, hash, in.Now)
			if err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	res := status.Injection(in)

	if res.Write && !in.InStep {
		if err := r.write(ctx, compiled, hash); err != nil {
			return ctrl.Result{}, err
		}
		r.mu.Lock()
		r.inStep[set.Name] = inStep{hash: hash, since: r.Clock.Now()}
		r.mu.Unlock()
	}
	if set.Status.ObservedGeneration == 0 {
		// The status subresource refuses a status without the rollout's
		// counts, which the SidecarSet controller writes first. Until then
		// the webhook injects the set, as it does without status.injection.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	// The status before a removal: the webhook must have taken the set
	// back (status.Injection waits for that) before its policy goes.
	if err := r.writeStatus(ctx, set, res.Status); err != nil {
		return ctrl.Result{}, err
	}
	if res.Remove && r.Served {
		wait, err := r.handBack(ctx, set)
		if err != nil {
			return ctrl.Result{}, err
		}
		if wait {
			return ctrl.Result{RequeueAfter: status.Handover}, nil
		}
	}
	return ctrl.Result{RequeueAfter: res.RecheckAfter}, nil
}

// handBack removes the set's policy once the pod webhook's scope takes the
// set in: the scope leaves out the sets a policy injects, and a policy
// removed before the scope was written would leave the set's new pods to
// neither. A scope that cannot be written keeps the policy, and the
// reconcile is retried; a scope written only now keeps it for Handover
// more (wait), until every apiserver has read the scope.
func (r *PolicyReconciler) handBack(ctx context.Context, set *v1alpha1.SidecarSet) (wait bool, err error) {
	var policies admissionregistrationv1.MutatingAdmissionPolicyList
	if err := r.Client.List(ctx, &policies, client.MatchingLabels{policy.LabelSet: set.Name}); err != nil {
		return false, fmt.Errorf("list MutatingAdmissionPolicies of %s: %w", set.Name, err)
	}
	var bindings admissionregistrationv1.MutatingAdmissionPolicyBindingList
	if err := r.Client.List(ctx, &bindings, client.MatchingLabels{policy.LabelSet: set.Name}); err != nil {
		return false, fmt.Errorf("list MutatingAdmissionPolicyBindings of %s: %w", set.Name, err)
	}
	if len(policies.Items)+len(bindings.Items) == 0 {
		return false, nil
	}
	if r.WebhookScope != nil && set.Status.Injection != nil && set.Status.Injection.Path == v1alpha1.InjectionWebhook {
		wrote, err := r.WebhookScope.Sync(ctx)
		if err != nil {
			return false, fmt.Errorf("keep the policy of %s until the pod webhook's scope takes the set back: %w", set.Name, err)
		}
		if wrote {
			return true, nil
		}
	}
	return false, r.remove(ctx, set.Name)
}

// compile returns the policy and binding for the revision new pods get
// (inject.FallbackRevision while a stalled rollout is paused, as the
// webhook injects), owned by set and marked with the hash of what they say.
func (r *PolicyReconciler) compile(ctx context.Context, set *v1alpha1.SidecarSet) (policy.Compiled, string, error) {
	injected := set
	if name := inject.FallbackRevision(set); name != "" {
		fallback, err := r.fallback(ctx, set, name)
		if err != nil {
			// As the webhook does: the latest revision is what would be
			// injected without the fallback.
			ctrl.LoggerFrom(ctx).Error(err, "read the completed revision a stalled rollout falls back to; compiling the latest", "revision", name)
		} else {
			injected = fallback
		}
	}
	excluded, err := r.excluded(ctx)
	if err != nil {
		return policy.Compiled{}, "", err
	}
	canaries, err := r.canaries(ctx, set.Name)
	if err != nil {
		return policy.Compiled{}, "", err
	}
	compiled, err := policy.Compile(injected, policy.Options{ManagerNamespace: r.Namespace, Excluded: excluded, Canaries: canaries})
	if err != nil {
		return policy.Compiled{}, "", err
	}
	raw, err := json.Marshal([]any{compiled.Policy, compiled.Binding})
	if err != nil {
		return policy.Compiled{}, "", fmt.Errorf("encode the compiled policy: %w", err)
	}
	sum := sha256.Sum256(raw)
	return compiled, hex.EncodeToString(sum[:])[:16], nil
}

// canaries names the canaries of the set named base, sorted.
func (r *PolicyReconciler) canaries(ctx context.Context, base string) ([]string, error) {
	var list v1alpha1.SidecarSetList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list SidecarSets for the canaries of %s: %w", base, err)
	}
	var out []string
	for i := range list.Items {
		if inject.CanaryOf(&list.Items[i]) == base {
			out = append(out, list.Items[i].Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// excluded returns the namespaces the installed pod webhook leaves out by
// name: a policy never injects where the webhook is never called.
func (r *PolicyReconciler) excluded(ctx context.Context) ([]string, error) {
	if r.Configuration == "" {
		return nil, nil
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.Configuration}, &cfg); err != nil {
		return nil, fmt.Errorf("get MutatingWebhookConfiguration %s for the namespaces it excludes: %w", r.Configuration, err)
	}
	for _, w := range cfg.Webhooks {
		if w.Name == r.Webhook {
			return scope.Excluded(w.NamespaceSelector), nil
		}
	}
	return nil, fmt.Errorf("MutatingWebhookConfiguration %s has no webhook %s", r.Configuration, r.Webhook)
}

// fallback returns a copy of set declaring the revision name.
func (r *PolicyReconciler) fallback(ctx context.Context, set *v1alpha1.SidecarSet, name string) (*v1alpha1.SidecarSet, error) {
	var cr appsv1.ControllerRevision
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, &cr); err != nil {
		return nil, fmt.Errorf("read revision %s: %w", name, err)
	}
	if cr.Labels[v1alpha1.LabelSidecarSet] != set.Name {
		return nil, fmt.Errorf("revision %s belongs to %q", name, cr.Labels[v1alpha1.LabelSidecarSet])
	}
	copied := set.DeepCopy()
	if err := revision.ApplyData(&copied.Spec, cr.Data.Raw); err != nil {
		return nil, fmt.Errorf("revision %s: %w", name, err)
	}
	return copied, nil
}

// inStepSince says whether the set's policy and binding carry hash, and
// since when as far as this manager knows: a manager that finds them in
// step without having written them counts from now.
func (r *PolicyReconciler) inStepSince(ctx context.Context, setName, hash string, now time.Time) (bool, time.Time, error) {
	name := policy.Name(setName)
	for _, obj := range []client.Object{&admissionregistrationv1.MutatingAdmissionPolicy{}, &admissionregistrationv1.MutatingAdmissionPolicyBinding{}} {
		err := r.Client.Get(ctx, client.ObjectKey{Name: name}, obj)
		if apierrors.IsNotFound(err) {
			return false, time.Time{}, nil
		}
		if err != nil {
			return false, time.Time{}, fmt.Errorf("get %T %s: %w", obj, name, err)
		}
		if obj.GetAnnotations()[AnnotationPolicyHash] != hash {
			return false, time.Time{}, nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen, ok := r.inStep[setName]
	if !ok || seen.hash != hash {
		seen = inStep{hash: hash, since: now}
		r.inStep[setName] = seen
	}
	return true, seen.since, nil
}

// write creates or updates the policy, then the binding that names it.
func (r *PolicyReconciler) write(ctx context.Context, compiled policy.Compiled, hash string) error {
	for _, obj := range []client.Object{compiled.Policy, compiled.Binding} {
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[AnnotationPolicyHash] = hash
		obj.SetAnnotations(annotations)
		if err := r.createOrUpdate(ctx, obj); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).V(1).Info("wrote policy", "kind", fmt.Sprintf("%T", obj), "name", klog.KObj(obj), "hash", hash)
	}
	return nil
}

func (r *PolicyReconciler) createOrUpdate(ctx context.Context, obj client.Object) error {
	current, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("copy %T", obj)
	}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), current)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get %T %s: %w", obj, obj.GetName(), err)
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	if err := r.Client.Update(ctx, obj); err != nil {
		return fmt.Errorf("update %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// remove deletes the bindings, then the policies, labelled as the set's.
func (r *PolicyReconciler) remove(ctx context.Context, setName string) error {
	if !r.Served {
		return nil
	}
	labelled := client.MatchingLabels{policy.LabelSet: setName}
	var bindings admissionregistrationv1.MutatingAdmissionPolicyBindingList
	if err := r.Client.List(ctx, &bindings, labelled); err != nil {
		return fmt.Errorf("list MutatingAdmissionPolicyBindings of %s: %w", setName, err)
	}
	for i := range bindings.Items {
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, &bindings.Items[i])); err != nil {
			return fmt.Errorf("delete MutatingAdmissionPolicyBinding %s: %w", bindings.Items[i].Name, err)
		}
	}
	var policies admissionregistrationv1.MutatingAdmissionPolicyList
	if err := r.Client.List(ctx, &policies, labelled); err != nil {
		return fmt.Errorf("list MutatingAdmissionPolicies of %s: %w", setName, err)
	}
	for i := range policies.Items {
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, &policies.Items[i])); err != nil {
			return fmt.Errorf("delete MutatingAdmissionPolicy %s: %w", policies.Items[i].Name, err)
		}
	}
	return nil
}

// writeStatus writes status.injection alone, when it changed: the rest of
// the status is the rollout's (writeStatus leaves injection out).
func (r *PolicyReconciler) writeStatus(ctx context.Context, set *v1alpha1.SidecarSet, st v1alpha1.InjectionStatus) error {
	if status.InjectionEqual(set.Status.Injection, &st) {
		return nil
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"injection": st}})
	if err != nil {
		return fmt.Errorf("encode status.injection: %w", err)
	}
	if err := r.Client.Status().Patch(ctx, set.DeepCopy(), client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("write status.injection: %w", err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("injection path", "path", st.Path, "reason", st.Reason)
	return nil
}
