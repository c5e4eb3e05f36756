package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/sidecarset/sidecarset/internal/manager"
)

// StartManager starts the sidecarset manager against the environment,
// serving the webhooks Start installed, and returns once its cache has
// synced and its webhook server answers. cfg, when not nil, replaces the
// environment's administrator config (to count or slow the manager's
// requests). The manager stops when ctx is done; the returned channel then
// yields how it ended.
func (e *Env) StartManager(ctx context.Context, cfg *rest.Config, opts manager.Options) (ctrl.Manager, <-chan error, error) {
	if cfg == nil {
		cfg = e.Config
	}
	if e.Webhooks != nil {
		opts.WebhookHost = e.Webhooks.LocalServingHost
		opts.WebhookPort = e.Webhooks.LocalServingPort
		opts.CertDir = e.Webhooks.LocalServingCertDir
	}
	// Tests and the playground may start a manager more than once.
	opts.SeveralPerProcess = true
	// No fixed ports: several environments may run on one machine at once.
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	// In a cluster the manager runs in its namespace; here it must be made.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}}
	if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("create namespace %s: %w", opts.Namespace, err)
	}
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	started := mgr.GetWebhookServer().StartedChecker()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			if err == nil {
				return false, errors.New("the manager stopped before it was ready")
			}
			return false, fmt.Errorf("manager exited: %w", err)
		default:
		}
		if e.Webhooks != nil && started(&http.Request{}) != nil {
			return false, nil //nolint:nilerr // not yet: the poll tries again
		}
		return mgr.GetCache().WaitForCacheSync(ctx), nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("wait for the manager: %w", err)
	}
	return mgr, done, nil
}
