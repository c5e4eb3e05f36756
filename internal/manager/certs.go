package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// Names of the webhook configurations in config/webhook, whose caBundle the
// certificate rotation keeps current.
const (
	mutatingWebhookConfiguration   = "sidecarset-mutating"
	validatingWebhookConfiguration = "sidecarset-validating"
	// podWebhook is the pod mutator's webhook in the mutating
	// configuration, whose scope the leader narrows.
	podWebhook = "pods.sidecarset.dev"
)

// serveWebhooks registers the webhooks: at once when the certificate is
// provided, or once the rotation has written it. It returns the readiness
// check, which fails until the webhook server answers TLS.
func serveWebhooks(mgr ctrl.Manager, opts Options) (healthz.Checker, error) {
	if !opts.CertRotation {
		if err := registerWebhooks(mgr, opts); err != nil {
			return nil, err
		}
		return mgr.GetWebhookServer().StartedChecker(), nil
	}
	certsReady := make(chan struct{})
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: opts.Namespace, Name: opts.CertSecret},
		CertDir:        opts.CertDir,
		CAName:         "sidecarset-ca",
		CAOrganization: "sidecarset",
		DNSName:        fmt.Sprintf("%s.%s.svc", opts.WebhookService, opts.Namespace),
		IsReady:        certsReady,
		Webhooks: []rotator.WebhookInfo{
			{Name: mutatingWebhookConfiguration, Type: rotator.Mutating},
			{Name: validatingWebhookConfiguration, Type: rotator.Validating},
		},
		RequireLeaderElection: false,
	})
	if err != nil {
		return nil, fmt.Errorf("set up webhook certificate rotation: %w", err)
	}
	registered := make(chan struct{})
	// The webhook server loads its certificate when it starts, so it is
	// added only once the certificate is mounted; until then the manager
	// runs, and reports not ready.
	err = mgr.Add(everyReplica{run: func(ctx context.Context) error {
		select {
		case <-certsReady:
		case <-ctx.Done():
			return nil
		}
		if err := registerWebhooks(mgr, opts); err != nil {
			return err
		}
		close(registered)
		return nil
	}})
	if err != nil {
		return nil, err
	}
	return func(req *http.Request) error {
		select {
		case <-registered:
			return mgr.GetWebhookServer().StartedChecker()(req)
		default:
			return errors.New("webhook certificate not mounted yet")
		}
	}, nil
}

// everyReplica runs on every replica, leader or not: all of them serve
// webhooks.
type everyReplica struct {
	run func(context.Context) error
}

func (w everyReplica) Start(ctx context.Context) error { return w.run(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }
