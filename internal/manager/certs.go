package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: opts.Namespace, Name: opts.CertSecret},
		CertDir:        opts.CertDir,
		CAName:         "sidecarset-ca",
		CAOrganization: "sidecarset",
		DNSName:        fmt.Sprintf("%s.%s.svc", opts.WebhookService, opts.Namespace),
		// Closed by the rotation once it saw the files mounted; required,
		// though readiness is judged below.
		IsReady: make(chan struct{}),
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
	// Why the certificate is not served yet, for the readiness check to say.
	var waiting atomic.Value
	waiting.Store("the certificate is not mounted yet")
	// The webhook server loads its certificate when it starts, so it is
	// added only once the certificate is mounted; until then the manager
	// runs, and reports not ready.
	err = mgr.Add(everyReplica{run: func(ctx context.Context) error {
		// Looked for every second: the rotation's own readiness looks at
		// ever longer intervals, so a replica whose Secret the kubelet
		// mounts a minute after the write (its usual delay) would stay
		// unready for minutes more. The configurations are read from the
		// cache: the manager may list and watch them, not get them.
		err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			err := certTrusted(ctx, mgr.GetClient(), opts.CertDir)
			if err != nil {
				waiting.Store(err.Error())
			}
			return err == nil, nil
		})
		if err != nil {
			return nil //nolint:nilerr // the manager stops: nothing to serve
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
			return fmt.Errorf("webhook certificate not served yet: %s", waiting.Load())
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

// certTrusted says why the certificate mounted in dir cannot be served yet:
// it is not there, or the webhook configurations' CA does not yet trust it
// (the rotation injects the CA it wrote into both).
func certTrusted(ctx context.Context, r client.Reader, dir string) error {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := r.Get(ctx, client.ObjectKey{Name: mutatingWebhookConfiguration}, mutating); err != nil {
		return err
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.Get(ctx, client.ObjectKey{Name: validatingWebhookConfiguration}, validating); err != nil {
		return err
	}
	var bundles [][]byte
	for _, w := range mutating.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for _, w := range validating.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for _, bundle := range bundles {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			return errors.New("a webhook's caBundle holds no certificate yet")
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
			return err
		}
	}
	return nil
}
