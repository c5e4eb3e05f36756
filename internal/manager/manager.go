// Package manager wires the sidecarset manager: one controller-runtime
// manager with its cache, the webhooks and the controllers. The binary, the
// playground and the integration tests all build it here, so they run the
// same thing.
package manager

import (
	"crypto/tls"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/policy"
	sidecarscheme "github.com/sidecarset/sidecarset/internal/scheme"
	"github.com/sidecarset/sidecarset/internal/validation"
	sidecarwebhook "github.com/sidecarset/sidecarset/internal/webhook"
)

// Options configure the manager. The zero value is not useful; start from
// DefaultOptions.
type Options struct {
	// Namespace is the manager's own namespace: never injected, and where
	// revisions are kept.
	Namespace string
	// MetricsAddr and ProbeAddr are listen addresses; "0" turns one off.
	MetricsAddr string
	ProbeAddr   string
	// PprofAddr, when neither "" nor "0", serves Go's /debug/pprof there:
	// a heap profile of a manager that holds more memory than expected.
	PprofAddr string
	// WebhookHost, WebhookPort and CertDir say where the webhooks are served
	// and with which certificate (tls.crt and tls.key in CertDir).
	WebhookHost string
	WebhookPort int
	CertDir     string
	// CertRotation makes the manager generate and rotate its own webhook
	// certificate: kept in the Secret CertSecret (in Namespace, mounted at
	// CertDir), valid for the Service WebhookService, and injected as the
	// caBundle of the webhook configurations. Webhooks are served once the
	// certificate is in place.
	CertRotation   bool
	CertSecret     string
	WebhookService string
	// LeaderElection runs one active manager among replicas. It is on by
	// default, whatever the number of replicas: two managers running the
	// controllers at once (a rolling update, a second replica added later)
	// would each take maxUnavailable and the budgets' disruptions.
	LeaderElection bool
	// Workers is how many SidecarSets are reconciled at once.
	Workers int
	// NarrowPodWebhook makes the leader keep the pod webhook's
	// namespaceSelector, objectSelector and matchConditions to what the
	// SidecarSets can match (controller.WebhookScope): the apiserver then
	// calls it for no other pod, and with failurePolicy Fail an outage of
	// the manager refuses only those pods. Without it the leader writes
	// the scope back as installed, undoing an earlier manager's narrowing.
	NarrowPodWebhook bool
	// SeveralPerProcess allows more than one manager in one process over
	// its life (tests that restart the manager): controller names are then
	// not checked for uniqueness, which only guards metric names.
	SeveralPerProcess bool
	// ShutdownDrain is how long the manager keeps serving webhooks once it
	// is told to stop (its context is done: SIGTERM), failing /readyz
	// meanwhile, before it begins to stop. A pod's endpoint leaves the
	// Service while the kubelet sends SIGTERM, and reaches kube-proxy (or
	// the apiserver's endpoint routing) a moment later: until then new
	// webhook calls still arrive, and with failurePolicy Fail each one
	// that finds the listener closed fails a pod's creation.
	ShutdownDrain time.Duration
	// Injection says how new pods get their sidecars: through the pod
	// webhook, through a MutatingAdmissionPolicy per SidecarSet inside the
	// apiserver, or the policy where the apiserver serves it (Injections).
	Injection Injection
	// GracefulShutdown bounds how long the manager waits, after the drain,
	// for its controllers and webhooks to finish. The drain, this and a
	// margin for giving up the Lease must fit in the pod's
	// terminationGracePeriodSeconds.
	GracefulShutdown time.Duration
	// PatchPodMetadataAllowedKeys are the annotation keys SidecarSets may
	// write into pods with patchPodMetadata (--patch-pod-metadata-allowed-keys);
	// none when empty, and the SidecarSet webhook refuses a set that writes
	// another.
	PatchPodMetadataAllowedKeys validation.AllowedKeys
}

// LeaderElectionID names the Lease, in the manager's namespace, through
// which replicas elect the one that runs the controllers.
const LeaderElectionID = "sidecarset-manager.sidecarset.dev"

// LeaseDuration, RenewDeadline and RetryPeriod are client-go's defaults,
// set here so that controller.WriteTimeout is seen to stay within them. A
// leader tries to renew RetryPeriod after its last renewal and gives up
// RenewDeadline later; another may take over LeaseDuration after that last
// renewal. A pod write the old leader started before giving up must end
// before the takeover.
const (
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RetryPeriod   = 2 * time.Second
)

// DefaultOptions returns the options the binary starts from.
func DefaultOptions() Options {
	return Options{
		Namespace:        "sidecarset-system",
		MetricsAddr:      ":8080",
		ProbeAddr:        ":8081",
		WebhookPort:      9443,
		CertDir:          "/tmp/k8s-webhook-server/serving-certs",
		CertSecret:       "sidecarset-webhook-cert",
		WebhookService:   "sidecarset-webhook",
		LeaderElection:   true,
		Workers:          controller.DefaultWorkers,
		NarrowPodWebhook: true,
		ShutdownDrain:    5 * time.Second,
		GracefulShutdown: 10 * time.Second,
		Injection:        InjectionWebhook,
	}
}

// New returns a manager with the webhooks and controllers registered. Start
// it with Start(ctx); once ctx is done it drains for opts.ShutdownDrain,
// then stops.
func New(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	if cfg.QPS == 0 {
		// client-go would throttle to 5 requests a second; a rollout over
		// thousands of pods needs more. As controller-runtime's GetConfig
		// does, leave the pacing to the apiserver's priority and fairness.
		cfg = rest.CopyConfig(cfg)
		cfg.QPS = -1
	}
	mode, served, err := resolveInjection(cfg, opts.Injection)
	if err != nil {
		return nil, err
	}
	managed := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManaged: "true"})
	byObject := map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: managed, Transform: slimPod},
		// Whether a node is Ready is all the rollout reads of it.
		&corev1.Node{}: {Transform: slimNode},
		// Revisions live in the manager's namespace only.
		&appsv1.ControllerRevision{}: {Namespaces: map[string]cache.Config{opts.Namespace: {}}},
	}
	if served {
		// Only the policies and bindings compiled from SidecarSets.
		ours := labels.NewSelector()
		req, err := labels.NewRequirement(policy.LabelSet, selection.Exists, nil)
		if err != nil {
			return nil, fmt.Errorf("select policies: %w", err)
		}
		ours = ours.Add(*req)
		byObject[&admissionregistrationv1.MutatingAdmissionPolicy{}] = cache.ByObject{Label: ours}
		byObject[&admissionregistrationv1.MutatingAdmissionPolicyBinding{}] = cache.ByObject{Label: ours}
	}
	fence := &controller.Fence{}
	var lease resourcelock.Interface
	if opts.LeaderElection {
		if lease, err = newLease(cfg, opts.Namespace, fence); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: sidecarscheme.New(),
		Cache: cache.Options{
			// Only pods that carry an injection record are cached: a cluster's
			// other pods never cost the manager memory.
			ByObject:         byObject,
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.ProbeAddr,
		PprofBindAddress:        opts.PprofAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: opts.Namespace,
		// The lease fences the pod writes (fencedLease).
		LeaderElectionResourceLockInterface: lease,
		LeaseDuration:                       ptr.To(LeaseDuration),
		RenewDeadline:                       ptr.To(RenewDeadline),
		RetryPeriod:                         ptr.To(RetryPeriod),
		// The manager's process ends when the manager does, so it may give
		// the lease up at once, once its pod writes are over: a restarted or
		// replaced manager takes over without waiting for the lease to
		// expire.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &opts.GracefulShutdown,
		Controller:                    ctrlconfig.Controller{SkipNameValidation: ptr.To(opts.SeveralPerProcess)},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    opts.WebhookHost,
			Port:    opts.WebhookPort,
			CertDir: opts.CertDir,
			TLSOpts: []func(*tls.Config){requireModernTLS},
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("new manager: %w", err)
	}
	webhooksReady, err := serveWebhooks(mgr, opts)
	if err != nil {
		return nil, err
	}
	webhookScope := &controller.WebhookScope{
		Client:        mgr.GetClient(),
		Configuration: mutatingWebhookConfiguration,
		Webhook:       podWebhook,
		Namespace:     opts.Namespace,
		Wide:          !opts.NarrowPodWebhook,
	}
	if err := webhookScope.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the pod webhook's scope: %w", err)
	}
	err = (&controller.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Recorder:     mgr.GetEventRecorder("sidecarset-controller"),
		Namespace:    opts.Namespace,
		Workers:      opts.Workers,
		WebhookScope: webhookScope,
		Fence:        fence,
	}).SetupWithManager(mgr)
	if err != nil {
		return nil, fmt.Errorf("set up the SidecarSet controller: %w", err)
	}
	err = (&controller.PolicyReconciler{
		Client:        mgr.GetClient(),
		Namespace:     opts.Namespace,
		Mode:          mode,
		Served:        served,
		Configuration: mutatingWebhookConfiguration,
		Webhook:       podWebhook,
		WebhookScope:  webhookScope,
	}).SetupWithManager(mgr)
	if err != nil {
		return nil, fmt.Errorf("set up the policy controller: %w", err)
	}
	if err := forgetDeletedSets(mgr); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add health check: %w", err)
	}
	// Ready once the webhook server answers TLS, so the apiserver can call
	// it, and the webhooks can answer from a synced cache.
	if err := mgr.AddReadyzCheck("webhook", webhooksReady); err != nil {
		return nil, fmt.Errorf("add ready check: %w", err)
	}
	synced, err := cachesSynced(mgr)
	if err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("caches", synced); err != nil {
		return nil, fmt.Errorf("add ready check: %w", err)
	}
	d := &draining{Manager: mgr, drain: opts.ShutdownDrain, stopping: make(chan struct{})}
	if err := mgr.AddReadyzCheck("shutdown", d.check); err != nil {
		return nil, fmt.Errorf("add ready check: %w", err)
	}
	return d, nil
}

func registerWebhooks(mgr ctrl.Manager, opts Options) error {
	server := mgr.GetWebhookServer()
	server.Register(sidecarwebhook.PodMutatorPath, &webhook.Admission{
		Handler: &sidecarwebhook.PodMutator{
			Reader:    mgr.GetCache(),
			APIReader: mgr.GetAPIReader(),
			Recorder:  mgr.GetEventRecorder("sidecarset-webhook"),
			Options:   inject.Options{ManagerNamespace: opts.Namespace, Cache: &inject.Cache{}},
		},
		RecoverPanic: ptr.To(true),
	})
	err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.SidecarSet{}).
		WithDefaulter(sidecarwebhook.SidecarSetDefaulter{}).
		WithValidator(&sidecarwebhook.SidecarSetValidator{
			Reader:    mgr.GetAPIReader(),
			APIWriter: mgr.GetClient(),
			Options:   validation.Options{ManagerNamespace: opts.Namespace, AllowedAnnotationKeys: opts.PatchPodMetadataAllowedKeys},
		}).
		RecoverPanic(true).
		Complete()
	if err != nil {
		return fmt.Errorf("register SidecarSet webhooks: %w", err)
	}
	return nil
}
