package manager

// The permissions the manager needs, generated into config/rbac by
// controller-gen (make manifests) and used by the Helm chart.
//
// Pods: read the managed ones, patch sidecar images and records, resize
// sidecars (pods/resize), and set the SidecarSetUpgradable /
// SidecarSetDrifted conditions.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods/status;pods/resize,verbs=patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=sidecarset.dev,resources=sidecarsets,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=sidecarset.dev,resources=sidecarsets/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
//
// Certificate rotation keeps the caBundle of the two webhook configurations
// and the certificate in its Secret. Its cache lists and watches them (it
// cannot be narrowed to a name); it writes them with update, and only
// these, by name. The leader patches the pod webhook's selectors and
// matchConditions (controller.WebhookScope).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=sidecarset-mutating,verbs=update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=sidecarset-validating,verbs=update
//
// The policy injection path keeps one MutatingAdmissionPolicy and binding
// per SidecarSet, named after it. Whatever the injection path, the manager
// reads them and deletes those of sets the webhook injects, so that a
// manager moved back to --injection=webhook leaves none behind; creating
// and updating them is the separate role of package policyrbac, which the
// chart grants only with injection policy or auto.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingadmissionpolicies;mutatingadmissionpolicybindings,verbs=list;watch;delete
//
// In the manager's own namespace only: revisions, the certificate Secret
// (sidecarset-webhook-cert, --cert-secret), the leader-election Lease
// (LeaderElectionID: created on the first election, which a name cannot
// limit, then read and renewed by name), and server-side dry-run creates of
// the pod that asks the apiserver's pod validation about a SidecarSet's
// containers.
// +kubebuilder:rbac:groups=apps,namespace=sidecarset-system,resources=controllerrevisions,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",namespace=sidecarset-system,resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups="",namespace=sidecarset-system,resources=secrets,resourceNames=sidecarset-webhook-cert,verbs=update
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=sidecarset-system,resources=leases,verbs=create
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=sidecarset-system,resources=leases,resourceNames=sidecarset-manager.sidecarset.dev,verbs=get;update
// +kubebuilder:rbac:groups="",namespace=sidecarset-system,resources=pods,verbs=create
