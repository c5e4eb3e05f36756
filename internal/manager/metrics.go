package manager

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/metrics"
)

// forgetDeletedSets deletes the webhook's series of every SidecarSet the
// cache sees deleted. It runs on every replica, as the webhooks do; the
// controller's series are the leader's, which its reconcile of the deleted
// set deletes.
func forgetDeletedSets(mgr ctrl.Manager) error {
	err := mgr.Add(everyReplica{run: func(ctx context.Context) error {
		informer, err := mgr.GetCache().GetInformer(ctx, &v1alpha1.SidecarSet{})
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // the manager is stopping, which is no failure
			}
			return fmt.Errorf("start the cache of SidecarSets: %w", err)
		}
		_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
			// A deletion the watch missed comes as its last known state.
			if unknown, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = unknown.Obj
			}
			if set, ok := obj.(client.Object); ok {
				metrics.ForgetInjections(set.GetName())
			}
		}})
		if err != nil {
			return fmt.Errorf("watch SidecarSet deletions: %w", err)
		}
		// The handler goes with the cache, which stops with the manager.
		<-ctx.Done()
		return nil
	}})
	if err != nil {
		return fmt.Errorf("add the metrics cleanup: %w", err)
	}
	return nil
}
