package manager

import (
	"context"
	"errors"
	"net/http"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// draining is a manager that keeps serving for a while once told to stop.
//
// controller-runtime stops a manager's runnables as soon as its context is
// done: the controllers, then the caches, then the webhook server, whose
// listener closes at once (in-flight calls finish, new connections are
// refused), and the health probes last. In a cluster the pod's endpoint is
// still on its way out of kube-proxy at that moment, so the apiserver keeps
// sending webhook calls to a closed port. draining holds the stop back:
// readiness fails at once, everything else (webhooks, caches, controllers,
// the Lease) runs on for the drain, and only then does the manager stop.
type draining struct {
	ctrl.Manager
	drain time.Duration
	// stopping is closed when the drain begins.
	stopping chan struct{}
}

// Start runs the manager until ctx is done, drains, then stops it and
// returns how it stopped. The manager's own context keeps ctx's values but
// not its cancellation.
func (d *draining) Start(ctx context.Context) error {
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	done := make(chan error, 1)
	go func() { done <- d.Manager.Start(run) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	close(d.stopping)
	ctrl.LoggerFrom(ctx).Info("stopping: serving webhooks while the endpoint goes, not ready", "drain", d.drain)
	select {
	case err := <-done:
		return err
	case <-time.After(d.drain):
	}
	stop()
	return <-done
}

// check is the readiness check that fails once the drain has begun, so
// that the endpoint leaves the Service even when SIGTERM came without the
// pod's deletion.
func (d *draining) check(*http.Request) error {
	select {
	case <-d.stopping:
		return errors.New("stopping")
	default:
		return nil
	}
}
