// Command sidecarset-manager runs the SidecarSet controllers and the
// admission webhooks that inject sidecars into new pods.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sidecarset/sidecarset/internal/manager"
	"github.com/sidecarset/sidecarset/internal/validation"
)

const usage = `sidecarset-manager runs the SidecarSet controllers and webhooks.

It injects the sidecars that SidecarSets declare into new pods (a mutating
webhook, or with --injection=policy|auto a MutatingAdmissionPolicy per
SidecarSet that the apiserver runs itself), validates SidecarSets
(validating webhook), and rolls new sidecar images into running pods in
place.

Examples:
  # in a cluster, as the Helm chart runs it
  sidecarset-manager --namespace=sidecarset-system --cert-rotation

  # new pods injected inside the apiserver where it can (Kubernetes 1.36 or
  # later), so that pod creation never waits on the manager
  sidecarset-manager --namespace=sidecarset-system --cert-rotation --injection=auto

  # locally against a cluster, serving webhooks with certificates in ./certs
  sidecarset-manager --kubeconfig=$HOME/.kube/config --cert-dir=./certs --webhook-port=9443

Flags:
`

func main() {
	opts := manager.DefaultOptions()
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		opts.Namespace = ns
	}
	fs := flag.CommandLine
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.Namespace, "namespace", opts.Namespace,
		"the manager's own namespace (default from $POD_NAMESPACE): never injected; revisions are kept there")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", opts.MetricsAddr, "address of the metrics endpoint; 0 turns it off")
	fs.StringVar(&opts.ProbeAddr, "health-probe-bind-address", opts.ProbeAddr, "address of /healthz and /readyz; 0 turns it off")
	fs.StringVar(&opts.PprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof profiles (heap, CPU, goroutines); 0 turns it off, the default")
	fs.StringVar(&opts.WebhookHost, "webhook-host", opts.WebhookHost, "address the webhook server listens on (empty: all)")
	fs.IntVar(&opts.WebhookPort, "webhook-port", opts.WebhookPort, "port the webhook server listens on")
	fs.StringVar(&opts.CertDir, "cert-dir", opts.CertDir, "folder with the webhook serving certificate, tls.crt and tls.key")
	fs.BoolVar(&opts.CertRotation, "cert-rotation", opts.CertRotation,
		"generate and rotate the webhook certificate in the Secret --cert-secret (mounted at --cert-dir) and inject its CA into the webhook configurations")
	fs.StringVar(&opts.CertSecret, "cert-secret", opts.CertSecret, "Secret, in --namespace, that holds the rotated webhook certificate (the chart's RBAC lets the manager update sidecarset-webhook-cert only)")
	fs.StringVar(&opts.WebhookService, "webhook-service", opts.WebhookService, "Service, in --namespace, that the apiserver calls the webhooks through (the certificate's name)")
	fs.BoolVar(&opts.LeaderElection, "leader-elect", opts.LeaderElection,
		"elect one active manager among replicas, through a Lease in --namespace; turn it off only when no other manager can run against the cluster")
	fs.IntVar(&opts.Workers, "workers", opts.Workers, "how many SidecarSets are reconciled at once")
	fs.BoolVar(&opts.NarrowPodWebhook, "narrow-pod-webhook", opts.NarrowPodWebhook,
		"keep the pod webhook's namespaceSelector, objectSelector and matchConditions in sidecarset-mutating to what the SidecarSets can match, so that no other pod waits on it; false writes back the scope as installed (every pod outside the excluded namespaces)")
	fs.DurationVar(&opts.ShutdownDrain, "shutdown-drain", opts.ShutdownDrain,
		"on SIGTERM, how long to keep serving webhooks, reporting not ready, while the pod's endpoint leaves the Service, before stopping")
	fs.DurationVar(&opts.GracefulShutdown, "graceful-shutdown-timeout", opts.GracefulShutdown,
		"after the drain, how long to wait for work in flight; drain + this + a few seconds must fit in the pod's terminationGracePeriodSeconds")
	fs.Var(&opts.Injection, "injection", "how new pods get their sidecars, `mode` one of:\n"+
		"webhook: the pod webhook (with failurePolicy Fail, an outage of the manager blocks pod creation in the namespaces it covers);\n"+
		"policy: each SidecarSet compiled into a MutatingAdmissionPolicy that the apiserver runs itself, with no call to the manager\n"+
		"  (needs admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, Kubernetes 1.36 or later); a set a policy cannot\n"+
		"  express stays on the webhook, and its status.injection says why (kubectl sidecarset status);\n"+
		"auto: policy where the apiserver serves it, webhook elsewhere")
	fs.Func(strings.TrimPrefix(validation.AllowedKeysFlag, "--"),
		"annotation keys SidecarSets may write into pods with spec.patchPodMetadata, comma-separated: a key (prometheus.io/scrape), a prefix ending in \"/\" (example.com/: every key under it) or in \"*\" (example.com/log-*; \"*\" alone: every key); keys under sidecarset.dev/ never. Default none: the SidecarSet webhook refuses a set that writes any other key",
		func(s string) (err error) {
			opts.PatchPodMetadataAllowedKeys, err = validation.ParseAllowedKeys(s)
			return err
		})
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	// --kubeconfig is registered by controller-runtime's config package.
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	if opts.Workers < 1 {
		log.Error(fmt.Errorf("--workers=%d: must be at least 1", opts.Workers), "check flags")
		os.Exit(2)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "load kubeconfig")
		os.Exit(1)
	}
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		log.Error(err, "build manager")
		os.Exit(1)
	}
	log.Info("starting", "namespace", opts.Namespace, "webhookPort", opts.WebhookPort)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped with an error")
		os.Exit(1)
	}
}
