package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// webhookReads are what the webhooks read from the manager's cache: the
// SidecarSets to inject and validate against, the pod's namespace, and the
// revisions new pods get while a stalled rollout is paused.
var webhookReads = []client.Object{&v1alpha1.SidecarSet{}, &corev1.Namespace{}, &appsv1.ControllerRevision{}}

// cachesSynced returns the readiness check that fails until the cache holds
// what the webhooks read. The cache starts its informers only when first
// asked, and a replica that is not the leader runs no controller that would
// ask: without this, a new replica reports ready, the Service sends it
// admission requests, and it answers them from an empty cache (a pod
// created without its sidecars, a SidecarSet validated against no others).
func cachesSynced(mgr ctrl.Manager) (healthz.Checker, error) {
	synced := make(chan struct{})
	err := mgr.Add(everyReplica{run: func(ctx context.Context) error {
		for _, obj := range webhookReads {
			if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
				if ctx.Err() != nil {
					return nil //nolint:nilerr // the manager is stopping, which is no failure
				}
				return fmt.Errorf("start the cache of %T: %w", obj, err)
			}
		}
		if mgr.GetCache().WaitForCacheSync(ctx) {
			close(synced)
		}
		return nil
	}})
	if err != nil {
		return nil, fmt.Errorf("add the cache readiness check: %w", err)
	}
	return func(*http.Request) error {
		select {
		case <-synced:
			return nil
		default:
			return errors.New("caches not synced yet")
		}
	}, nil
}
