package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// Init readies r for calls without a manager, as SetupWithManager does.
func (r *Reconciler) Init() {
	r.memory = map[string]*memory{}
}

// CountUnmanaged is countUnmanaged, for tests outside the package.
func (r *Reconciler) CountUnmanaged(ctx context.Context, set *v1alpha1.SidecarSet) (unmanaged, skipped int32, err error) {
	c, err := r.countUnmanaged(ctx, set)
	return c.Unmanaged, c.Skipped, err
}

// SetsOfBudget is setsOfBudget, for tests outside the package.
func (r *Reconciler) SetsOfBudget(ctx context.Context, pdb client.Object) []reconcile.Request {
	return r.setsOfBudget(ctx, pdb)
}
