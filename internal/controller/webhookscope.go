package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/scope"
)

// WebhookScope keeps the pod webhook's namespaceSelector, objectSelector
// and matchConditions to what the SidecarSets can match (internal/scope),
// so that the apiserver calls the webhook for no other pod. It runs on the
// leader only, and writes those three fields of that one webhook only, with
// a JSON patch: the certificate rotation, on every replica, writes the
// configuration's caBundle with an update carrying the resourceVersion it
// read, so neither loses the other's change.
//
// The namespaces the installed configuration excludes by name
// (kubernetes.io/metadata.name NotIn) stay excluded, with Namespace, the
// manager's own, always among them.
//
// A set created, or widened, reaches the webhook once Sync has written it
// and the apiserver has seen the write: pods created in between are not
// injected, and the set's controller counts them with unmanagedPods. The
// SidecarSet controller calls Sync before it writes a set's status, so a
// status that observed a generation means the webhook sees its pods.
type WebhookScope struct {
	Client client.Client
	// Configuration and Webhook name the MutatingWebhookConfiguration and
	// its pod webhook.
	Configuration string
	Webhook       string
	Namespace     string
	// Wide writes the scope as installed (scope.Installed) instead of the
	// narrowed one: a manager told not to narrow the webhook undoes what an
	// earlier one narrowed.
	Wide bool

	// mu orders the writes: two reconciles computing from different
	// caches must not write the older scope last.
	mu sync.Mutex
	// synced is the input of the last scope found written, so that the
	// reconciles of an unchanged list cost no more than reading it.
	synced string
}

// Sync writes the scope of the SidecarSets in the cache, unless the
// webhook holds it already.
func (s *WebhookScope) Sync(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var list v1alpha1.SidecarSetList
	// Read only, so the cache's objects need no copy.
	if err := s.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list SidecarSets for the pod webhook's scope: %w", err)
	}
	var configs admissionregistrationv1.MutatingWebhookConfigurationList
	if err := s.Client.List(ctx, &configs); err != nil {
		return fmt.Errorf("list MutatingWebhookConfigurations: %w", err)
	}
	c := slices.IndexFunc(configs.Items, func(m admissionregistrationv1.MutatingWebhookConfiguration) bool { return m.Name == s.Configuration })
	if c < 0 {
		return fmt.Errorf("get MutatingWebhookConfiguration %s: not found", s.Configuration)
	}
	cfg := configs.Items[c]
	// Another webhook on pod creates may add the labels a set selects,
	// after ours was first considered: then the scope cannot go by labels.
	labelled := otherPodWebhook(configs.Items, s.Configuration)
	// The scope reads the sets' specs, which their generation versions,
	// and the path that injects each.
	input := fmt.Sprintf("%s/%s/%t", cfg.ResourceVersion, labelled, s.Wide)
	for j := range list.Items {
		input += fmt.Sprintf(";%s/%s/%d/%t", list.Items[j].Name, list.Items[j].UID, list.Items[j].Generation, inject.ByPolicy(&list.Items[j]))
	}
	if input == s.synced {
		return nil
	}
	i := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == s.Webhook })
	if i < 0 {
		return fmt.Errorf("MutatingWebhookConfiguration %s has no webhook %s", s.Configuration, s.Webhook)
	}
	current := &cfg.Webhooks[i]
	sets := make([]*v1alpha1.SidecarSet, len(list.Items))
	for j := range list.Items {
		sets[j] = &list.Items[j]
	}
	excluded := append(scope.Excluded(current.NamespaceSelector), s.Namespace)
	var want scope.Scope
	switch {
	case s.Wide:
		want = scope.Installed(excluded)
	case labelled != "":
		want = scope.OfNamespaces(sets, excluded)
	default:
		want = scope.Of(sets, excluded)
	}
	if equality.Semantic.DeepEqual(current.NamespaceSelector, want.NamespaceSelector) &&
		equality.Semantic.DeepEqual(current.ObjectSelector, want.ObjectSelector) &&
		equality.Semantic.DeepEqual(current.MatchConditions, want.MatchConditions) {
		s.synced = input
		return nil
	}
	patch, err := scopePatch(i, s.Webhook, want)
	if err != nil {
		return err
	}
	if err := s.Client.Patch(ctx, &cfg, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("patch the scope of webhook %s in MutatingWebhookConfiguration %s: %w", s.Webhook, s.Configuration, err)
	}
	if s.Wide {
		ctrl.LoggerFrom(ctx).Info("wrote the pod webhook's scope as installed: every pod outside the excluded namespaces",
			"excluded", excluded)
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("narrowed the pod webhook to what the SidecarSets can match",
		"sidecarSets", len(sets), "byNamespaceOnlyBecauseOf", labelled, "objectSelector", want.ObjectSelector.MatchExpressions,
		"namespaceSelector", want.NamespaceSelector.MatchExpressions)
	return nil
}

// otherPodWebhook names a webhook of a configuration other than ours that
// the apiserver may call on a pod's creation (it may add labels), or "".
func otherPodWebhook(configs []admissionregistrationv1.MutatingWebhookConfiguration, ours string) string {
	for _, c := range configs {
		if c.Name == ours {
			continue
		}
		for _, w := range c.Webhooks {
			for _, r := range w.Rules {
				if ruleCovers(r, "", "pods", admissionregistrationv1.Create) {
					return c.Name + "/" + w.Name
				}
			}
		}
	}
	return ""
}

// ruleCovers says whether r matches the creation of resource in group.
func ruleCovers(r admissionregistrationv1.RuleWithOperations, group, resource string, op admissionregistrationv1.OperationType) bool {
	matches := func(list []string, v string) bool { return slices.Contains(list, "*") || slices.Contains(list, v) }
	ops := make([]string, len(r.Operations))
	for i, o := range r.Operations {
		ops[i] = string(o)
	}
	return matches(r.APIGroups, group) && matches(ops, string(op)) &&
		(matches(r.Resources, resource) || slices.Contains(r.Resources, "*/*"))
}

// scopePatch replaces the three fields of webhook i, after testing that it
// is still the one named name: the list may have changed since it was read.
func scopePatch(i int, name string, sc scope.Scope) ([]byte, error) {
	at := fmt.Sprintf("/webhooks/%d", i)
	ops := []map[string]any{
		{"op": "test", "path": at + "/name", "value": name},
		{"op": "add", "path": at + "/namespaceSelector", "value": sc.NamespaceSelector},
		{"op": "add", "path": at + "/objectSelector", "value": sc.ObjectSelector},
		{"op": "add", "path": at + "/matchConditions", "value": sc.MatchConditions},
	}
	out, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encode the pod webhook's scope: %w", err)
	}
	return out, nil
}

// SetupWithManager registers the controller that calls Sync when a
// SidecarSet changes and when a webhook configuration does (a chart
// upgrade writes ours as installed; another one on pods widens the scope),
// retrying a failed write with back-off.
func (s *WebhookScope) SetupWithManager(mgr ctrl.Manager) error {
	key := reconcile.Request{NamespacedName: types.NamespacedName{Name: s.Configuration}}
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("webhookscope").
		Watches(&v1alpha1.SidecarSet{}, one, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, pathChanged))).
		Watches(&admissionregistrationv1.MutatingWebhookConfiguration{}, one).
		Complete(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, s.Sync(ctx)
		}))
}

// pathChanged passes an update of a SidecarSet whose injection path
// (status.injection) changed: the scope leaves out the sets a policy
// injects.
var pathChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, ok := e.ObjectOld.(*v1alpha1.SidecarSet)
		cur, ok2 := e.ObjectNew.(*v1alpha1.SidecarSet)
		return ok && ok2 && inject.ByPolicy(old) != inject.ByPolicy(cur)
	},
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}
