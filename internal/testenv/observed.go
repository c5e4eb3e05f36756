package testenv

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// WaitObserved waits until the manager has written a status of the
// SidecarSet named name for its current generation: then the manager's
// cache, which the pod webhook reads, holds it, and pods created from now
// on are injected with it.
func WaitObserved(ctx context.Context, c client.Client, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		set := &v1alpha1.SidecarSet{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, set); err != nil {
			return false, err
		}
		return set.Status.ObservedGeneration >= set.Generation, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the manager to see SidecarSet %s: %w", name, err)
	}
	return nil
}
