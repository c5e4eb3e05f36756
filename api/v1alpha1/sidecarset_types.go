package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Well-known names on pods and SidecarSets. The prefix is sidecarset.dev/.
const (
	// AnnotationInjected lists, comma-separated and sorted, the SidecarSets
	// injected into a pod.
	AnnotationInjected = "sidecarset.dev/injected"
	// AnnotationState holds, per SidecarSet, what the webhook and the controller
	// wrote into a pod (see internal/revision for its JSON).
	AnnotationState = "sidecarset.dev/state"
	// AnnotationInject set to "false" by a user opts one pod out of injection.
	AnnotationInject = "sidecarset.dev/inject"
	// AnnotationSkipped lists, comma-separated and sorted, the SidecarSets
	// that matched a pod at its creation but could not be injected into it
	// (the webhook says why in an admission warning and an event on the set).
	// Such a pod counts in the set's skippedPods, not in unmanagedPods.
	AnnotationSkipped = "sidecarset.dev/skipped"
	// AnnotationSkippedReasons holds, as a JSON object keyed by SidecarSet
	// name, why each set AnnotationSkipped names was left out of the pod,
	// as the admission warning said it. The set's event says it too, but
	// at most once per set and reason in a while: the reason of a later
	// pod, after the first was fixed, may never be told there.
	// AnnotationSkipped stays a list of names for those that read it.
	AnnotationSkippedReasons = "sidecarset.dev/skipped-reasons"
	// AnnotationAllowSystemNamespaces set to "true" on a SidecarSet lets it
	// inject into kube-system, kube-public, kube-node-lease and the manager's
	// own namespace.
	AnnotationAllowSystemNamespaces = "sidecarset.dev/allow-system-namespaces"
	// AnnotationFirstRevision on a ControllerRevision is the revision number
	// it was created with. The number itself moves to the top when a set
	// declares an older revision again; this one never changes, so it tells
	// which of two revisions was declared first.
	AnnotationFirstRevision = "sidecarset.dev/first-revision"
	// AnnotationCanary set to "true" on a SidecarSet, together with
	// AnnotationCanaryOf naming another SidecarSet (its base), makes it that
	// base's canary: a new pod the canary selects gets the canary's sidecars
	// instead of the base's. The canary declares the same container names as
	// its base and selects only pods the base selects.
	AnnotationCanary = "sidecarset.dev/canary"
	// AnnotationCanaryOf names the base SidecarSet of a canary (see
	// AnnotationCanary). Without AnnotationCanary "true" it has no effect.
	AnnotationCanaryOf = "sidecarset.dev/canary-of"
	// LabelManaged is "true" on every pod that carries an injection record, so
	// the manager can watch those pods only.
	LabelManaged = "sidecarset.dev/managed"
	// LabelSidecarSet names the SidecarSet a ControllerRevision belongs to.
	LabelSidecarSet = "sidecarset.dev/sidecarset"
	// LabelCustomVersion carries spec.customVersion on the
	// ControllerRevision of that spec.
	LabelCustomVersion = "sidecarset.dev/custom-version"

	// PodConditionUpgradable is the pod condition that says whether the
	// pod's sidecars can be updated in place.
	PodConditionUpgradable corev1.PodConditionType = "SidecarSetUpgradable"
	// ReasonUpdateImmutableField is the reason of SidecarSetUpgradable=False:
	// something changed that a running pod cannot take (beyond images and
	// the cpu and memory the apiserver resizes), which needs a new pod.
	ReasonUpdateImmutableField = "UpdateImmutableField"
	// DefaultMinReadySeconds is updateStrategy.minReadySeconds when unset:
	// the schema's default, and what a set read through a CRD older than
	// the field (which prunes it) means. It covers a new sidecar image
	// that crashes or fails its first probes within seconds of starting,
	// the commonest failure of a sidecar rollout, at 10 s per step.
	DefaultMinReadySeconds int32 = 10
)

// Condition types of a SidecarSet.
const (
	// ConditionProgressing is True while pods are being moved to the latest
	// revision.
	ConditionProgressing = "Progressing"
	// ConditionComplete is True when every pod the update strategy allows is on
	// the latest revision and ready.
	ConditionComplete = "Complete"
	// ConditionStalled is True when the rollout made no progress within
	// progressDeadlineSeconds; the rollout then pauses itself.
	ConditionStalled = "Stalled"
	// ConditionReconciling is Progressing under the name kstatus reads
	// (Flux, kpt, cli-utils): True while the rollout moves pods, so that
	// a set mid-rollout is InProgress there, and Failed once Stalled.
	ConditionReconciling = "Reconciling"
)

// PodInjectPolicy says where a sidecar goes relative to the pod's own
// containers.
// +kubebuilder:validation:Enum=BeforeAppContainer;AfterAppContainer
type PodInjectPolicy string

const (
	// BeforeAppContainer puts the sidecar before the pod's own containers.
	BeforeAppContainer PodInjectPolicy = "BeforeAppContainer"
	// AfterAppContainer puts the sidecar after the pod's own containers.
	AfterAppContainer PodInjectPolicy = "AfterAppContainer"
)

// UpdateStrategyType says whether running pods are updated.
// +kubebuilder:validation:Enum=RollingUpdate;NotUpdate
type UpdateStrategyType string

const (
	// RollingUpdateStrategy updates running pods in place, at the pace the
	// strategy sets.
	RollingUpdateStrategy UpdateStrategyType = "RollingUpdate"
	// NotUpdateStrategy leaves running pods alone; only new pods get the
	// latest revision.
	NotUpdateStrategy UpdateStrategyType = "NotUpdate"
)

// DriftPolicy says what happens when a managed sidecar's image was changed by
// someone other than the controller.
// +kubebuilder:validation:Enum=Report;Revert
type DriftPolicy string

const (
	// DriftReport counts and reports drifted pods and leaves them as they are.
	DriftReport DriftPolicy = "Report"
	// DriftRevert writes the declared image back, within maxUnavailable.
	DriftRevert DriftPolicy = "Revert"
)

// AdoptionPolicy says whether pods without an injection record are taken
// over.
// +kubebuilder:validation:Enum=Never;SameName
type AdoptionPolicy string

const (
	// AdoptNever leaves pods without an injection record unmanaged.
	AdoptNever AdoptionPolicy = "Never"
	// AdoptSameName manages a pod that already carries containers with the
	// sidecars' names whose spec equals the declared one except the image.
	AdoptSameName AdoptionPolicy = "SameName"
)

// JobPodsPolicy says how a SidecarSet's regular containers go into pods
// that are meant to finish.
// +kubebuilder:validation:Enum=NativeSidecar;Keep
type JobPodsPolicy string

const (
	// JobPodsNativeSidecar injects the regular containers into a pod with
	// restartPolicy Never or OnFailure as native sidecars: init containers
	// with restartPolicy Always, which the kubelet stops once the pod's
	// regular containers have exited, so the pod completes.
	JobPodsNativeSidecar JobPodsPolicy = "NativeSidecar"
	// JobPodsKeep injects them as regular containers there too, with a
	// warning: such a pod runs until its sidecars exit on their own.
	JobPodsKeep JobPodsPolicy = "Keep"
)

// UpgradeType says how a running sidecar takes a new image.
// +kubebuilder:validation:Enum=ColdUpgrade;HotUpgrade
type UpgradeType string

const (
	// ColdUpgrade writes the new image into the sidecar, which the kubelet
	// restarts: the sidecar is down between the old process stopping and
	// the new one starting.
	ColdUpgrade UpgradeType = "ColdUpgrade"
	// HotUpgrade runs the sidecar as two containers, NAME-1 and NAME-2,
	// one of them idle on the hotUpgradeEmptyImage. A new image starts in
	// the idle one, beside the old version; once it is complete and its
	// container Ready (it has taken over from the old one, which it learns
	// it must from SIDECARSET_VERSION and SIDECARSET_VERSION_ALT), the old
	// one gets the empty image. A sidecar process runs at every moment.
	HotUpgrade UpgradeType = "HotUpgrade"
)

// Hot-upgrade slots: the environment both containers of a HotUpgrade
// sidecar get, read through the downward API from the pod annotations
// below when the container starts.
//
// SIDECARSET_VERSION is the slot's version: 0 on the empty image, and one
// more than the other slot's at each new image. SIDECARSET_VERSION_ALT is
// the other slot's version when this one was written. A container that
// starts with VERSION > ALT > 0 is the new version of a hot upgrade and
// takes over from the old one, which still runs; one with
// 0 < VERSION < ALT is the old version restarted while its successor
// takes over, and must leave the work to it; ALT 0 is an ordinary start.
const (
	EnvHotVersion    = "SIDECARSET_VERSION"
	EnvHotVersionAlt = "SIDECARSET_VERSION_ALT"
	// AnnotationHotVersionPrefix and AnnotationHotVersionAltPrefix, with
	// the slot's container name, are the pod annotations they read.
	AnnotationHotVersionPrefix    = "version.sidecarset.dev/"
	AnnotationHotVersionAltPrefix = "versionalt.sidecarset.dev/"
)

// UpgradeStrategy says how a running sidecar takes a new image.
type UpgradeStrategy struct {
	// upgradeType is ColdUpgrade (the default: the kubelet restarts the
	// sidecar with the new image) or HotUpgrade (two containers, NAME-1
	// and NAME-2, hand over from the old version to the new one).
	// +optional
	UpgradeType UpgradeType `json:"upgradeType,omitempty"`

	// hotUpgradeEmptyImage is the image the idle container of a HotUpgrade
	// sidecar runs: it must stay running, pass the sidecar's probes and
	// lifecycle hooks (both containers have the same spec but the image)
	// and do nothing else. Required with HotUpgrade, refused otherwise.
	// +optional
	HotUpgradeEmptyImage string `json:"hotUpgradeEmptyImage,omitempty"`
}

// SidecarContainer is a sidecar the SidecarSet injects: every field of a
// pod's container (name, image, env, probes, resources...) plus the fields
// that say where and how it goes into the pod.
type SidecarContainer struct {
	corev1.Container `json:",inline"`

	// podInjectPolicy puts the sidecar before (BeforeAppContainer) or after
	// (AfterAppContainer) the pod's own containers in the list it goes
	// into. Defaults to BeforeAppContainer.
	// +optional
	// +kubebuilder:default=BeforeAppContainer
	PodInjectPolicy PodInjectPolicy `json:"podInjectPolicy,omitempty"`

	// shareVolumePolicy with type enabled gives the sidecar, at injection,
	// the volumeMounts of the pod's app containers, except those at a path
	// it already mounts, with the environment their subPathExpr needs.
	// Unset or disabled, the sidecar has only the mounts it declares.
	// +optional
	ShareVolumePolicy *SharePolicy `json:"shareVolumePolicy,omitempty"`

	// shareVolumeDevicePolicy with type enabled gives the sidecar, at
	// injection, the volumeDevices of the pod's app containers, except those
	// at a device path it already uses. Unset or disabled, the sidecar has
	// only the devices it declares.
	// +optional
	ShareVolumeDevicePolicy *SharePolicy `json:"shareVolumeDevicePolicy,omitempty"`

	// transferEnv copies environment variables from the pod's app
	// containers into the sidecar at injection. A variable the sidecar
	// declares itself keeps its own value; one the app container lacks is
	// not copied, with an admission warning.
	// +optional
	// +listType=atomic
	TransferEnv []TransferEnvVar `json:"transferEnv,omitempty"`

	// resourcesPolicy computes the sidecar's resource requests and limits at
	// injection from those of the pod's app containers, instead of fixed
	// resources, which must then be empty. On an init container it needs
	// restartPolicy Always (a native sidecar). The resources a pod got stay
	// as they were: sidecars sized by a policy are never resized, so a change
	// of resourcesPolicy makes running pods not upgradable in place, while a
	// new image still goes in place. (Fixed resources are resized in place.)
	// +optional
	ResourcesPolicy *ResourcesPolicy `json:"resourcesPolicy,omitempty"`

	// upgradeStrategy says how a running pod takes a new image of the
	// sidecar: ColdUpgrade (the default) or HotUpgrade. HotUpgrade is for
	// regular containers; the pod then has NAME-1 and NAME-2 instead of
	// NAME. Changing the upgradeType needs new pods.
	// +optional
	UpgradeStrategy *UpgradeStrategy `json:"upgradeStrategy,omitempty"`
}

// Hot reports whether c is upgraded hot: as two containers, HotSlots.
func (c *SidecarContainer) Hot() bool {
	return c.UpgradeStrategy != nil && c.UpgradeStrategy.UpgradeType == HotUpgrade
}

// PodNames returns the names c's containers have in a pod: its own, or
// the two HotSlots of a HotUpgrade sidecar.
func (c *SidecarContainer) PodNames() []string {
	if c.Hot() {
		slots := HotSlots(c.Name)
		return slots[:]
	}
	return []string{c.Name}
}

// HotSlots returns the names of the two containers a HotUpgrade sidecar
// named name runs as in a pod.
func HotSlots(name string) [2]string {
	return [2]string{name + "-1", name + "-2"}
}

// TargetContainersMode says how the target containers' resources combine.
// +kubebuilder:validation:Enum=sum;max
type TargetContainersMode string

const (
	// TargetContainersModeSum adds them up.
	TargetContainersModeSum TargetContainersMode = "sum"
	// TargetContainersModeMax takes the largest.
	TargetContainersModeMax TargetContainersMode = "max"
)

// ResourcesPolicy computes a sidecar's resources from the pod's app
// containers when it is injected.
type ResourcesPolicy struct {
	// targetContainersMode is sum or max: how the requests (and the limits)
	// of the target containers combine into the value an expression's
	// variable holds.
	// +required
	TargetContainersMode TargetContainersMode `json:"targetContainersMode"`

	// targetContainersNameRegex selects the target containers by name (RE2
	// syntax, unanchored: anchor with ^ and $ to match whole names) among
	// the pod's own containers and native sidecars, never those a
	// SidecarSet injected. A pod where it selects none is created without
	// the SidecarSet, which counts it in skippedPods. Defaults to ".*".
	// +optional
	// +kubebuilder:default=".*"
	// +kubebuilder:validation:MaxLength=256
	TargetContainersNameRegex string `json:"targetContainersNameRegex,omitempty"`

	// resourcesExpr holds the expressions for the sidecar's limits and
	// requests. Each is arithmetic with + - * /, parentheses, max(a, b),
	// min(a, b), numbers, percentages (50% is 0.5) and quantities (200m,
	// 64Mi) over one variable, cpu or memory: the target containers'
	// combined value. Example: cpu: "max(cpu * 10%, 50m)".
	// +required
	ResourcesExpr ResourcesExpr `json:"resourcesExpr"`

	// keepQoSClass keeps a Guaranteed pod Guaranteed: in such a pod the
	// sidecar's requests equal its limits (the computed limit where there is
	// one, else the computed request), so injecting it never moves the pod
	// to an earlier OOM-kill and eviction class. It needs an expression for
	// cpu and one for memory. In a pod of another class it changes nothing.
	// Defaults to false.
	// +optional
	KeepQoSClass bool `json:"keepQoSClass,omitempty"`
}

// ResourcesExpr holds the expressions of a resourcesPolicy.
type ResourcesExpr struct {
	// limits computes the sidecar's limits. Where a target container has no
	// limit for a resource, their combination is unlimited and the sidecar
	// gets no limit for it either.
	// +optional
	Limits *ResourceExpressions `json:"limits,omitempty"`

	// requests computes the sidecar's requests. A target container without
	// a request for a resource counts with its limit, as the apiserver
	// defaults it, or with 0 when it has neither.
	// +optional
	Requests *ResourceExpressions `json:"requests,omitempty"`
}

// ResourceExpressions are the expressions for cpu and memory. Each is
// arithmetic with + - * /, parentheses, max(a, b), min(a, b), numbers,
// percentages (50% is 0.5) and quantities (200m, 64Mi) over one variable:
// cpu in the cpu expression, memory in the memory one, the combined value of
// the target containers. A bare number counts in cores or bytes. Example:
// "max(cpu * 10%, 50m)". An empty expression leaves that resource unset.
type ResourceExpressions struct {
	// cpu is the expression for cpu, over the variable cpu, such as
	// "max(cpu * 10%, 50m)"; a bare number counts in cores. Its result is
	// rounded up to a millicore. Empty leaves cpu unset.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	CPU string `json:"cpu,omitempty"`

	// memory is the expression for memory, over the variable memory, such
	// as "min(memory * 20%, 256Mi)"; a bare number counts in bytes. Its
	// result is rounded up to a byte. Empty leaves memory unset.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Memory string `json:"memory,omitempty"`
}

// SharePolicyType says whether a sidecar shares the app containers'
// volumes.
// +kubebuilder:validation:Enum=enabled;disabled
type SharePolicyType string

const (
	// SharePolicyEnabled shares them.
	SharePolicyEnabled SharePolicyType = "enabled"
	// SharePolicyDisabled does not: the sidecar has only what it declares.
	SharePolicyDisabled SharePolicyType = "disabled"
)

// SharePolicy says whether a sidecar shares the app containers' volume
// mounts or devices.
type SharePolicy struct {
	// type is enabled (share them) or disabled (the sidecar has only what
	// it declares).
	// +required
	Type SharePolicyType `json:"type"`
}

// TransferEnvVar names environment variables of an app container to copy
// into the sidecar: the container by name or through a field of the pod,
// one variable or several.
// +kubebuilder:validation:XValidation:rule="has(self.sourceContainerName) != has(self.sourceContainerNameFrom)",message="exactly one of sourceContainerName and sourceContainerNameFrom must be set"
// +kubebuilder:validation:XValidation:rule="has(self.envName) != has(self.envNames)",message="exactly one of envName and envNames must be set"
type TransferEnvVar struct {
	// sourceContainerName is the name of the app container to copy from.
	// Exactly one of sourceContainerName and sourceContainerNameFrom is set.
	// +optional
	SourceContainerName string `json:"sourceContainerName,omitempty"`

	// sourceContainerNameFrom takes the app container's name from a field
	// of the pod, such as one of its labels. Exactly one of
	// sourceContainerName and sourceContainerNameFrom is set.
	// +optional
	SourceContainerNameFrom *SourceContainerNameSource `json:"sourceContainerNameFrom,omitempty"`

	// envName is the one variable to copy. Exactly one of envName and
	// envNames is set.
	// +optional
	EnvName string `json:"envName,omitempty"`

	// envNames are the variables to copy, at least one. Exactly one of
	// envName and envNames is set.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	EnvNames []string `json:"envNames,omitempty"`
}

// SourceContainerNameSource is where the name of the container to copy
// environment variables from is read.
type SourceContainerNameSource struct {
	// fieldRef selects a field of the pod: metadata.name,
	// metadata.namespace, metadata.labels['KEY'] or
	// metadata.annotations['KEY'].
	// +required
	FieldRef *corev1.ObjectFieldSelector `json:"fieldRef"`
}

// PatchPolicy says how a patchPodMetadata entry's annotation meets a value
// the pod already has under the same key.
// +kubebuilder:validation:Enum=Retain;Overwrite;MergePatchJson
type PatchPolicy string

const (
	// PatchRetain keeps the pod's value; the declared one goes only where the
	// pod has none.
	PatchRetain PatchPolicy = "Retain"
	// PatchOverwrite replaces the pod's value with the declared one.
	PatchOverwrite PatchPolicy = "Overwrite"
	// PatchMergePatchJSON treats both values as JSON objects and applies the
	// declared one to the pod's as a JSON merge patch (RFC 7386): members
	// the pod's object lacks are added, members both have take the declared
	// value (objects merged member by member), and a member declared null is
	// removed. Where the pod has no value, the declared one is written.
	PatchMergePatchJSON PatchPolicy = "MergePatchJson"
)

// PatchPodMetadata is a set of annotations written into the pods a
// SidecarSet is injected into, with the policy for keys the pod already
// has.
type PatchPodMetadata struct {
	// annotations to write, at least one, each key one the manager allows
	// (its flag --patch-pod-metadata-allowed-keys). With patchPolicy
	// MergePatchJson, every value is a JSON object.
	// +required
	// +kubebuilder:validation:MinProperties=1
	Annotations map[string]string `json:"annotations"`

	// patchPolicy is Retain (the pod's own value wins), Overwrite (the
	// declared value wins) or MergePatchJson (the declared value is merged
	// into the pod's). Defaults to Retain.
	// +optional
	// +kubebuilder:default=Retain
	PatchPolicy PatchPolicy `json:"patchPolicy,omitempty"`
}

// InjectionStrategy controls injection into new pods.
type InjectionStrategy struct {
	// paused, when true, stops injection into new pods; running pods are
	// still updated. Defaults to false.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// revision makes new pods get a revision of the set's history rather
	// than the latest one, so that a new spec, declared now, reaches new
	// pods only as the rollout lets it reach running ones. Changing it makes
	// no new revision. While a stalled rollout has paused itself, new pods
	// get status.completedRevision whatever revision names. A revision that
	// cannot be found when a pod is created leaves the pod with the latest
	// revision, an admission warning and an event on the set; the pod is
	// never refused. A set with revision is injected by the webhook, also
	// with --injection=policy.
	// +optional
	Revision *InjectionRevision `json:"revision,omitempty"`
}

// InjectionRevision names the revision new pods get, by exactly one of
// revisionName and customVersion.
type InjectionRevision struct {
	// revisionName is the name of one of the set's ControllerRevisions, as
	// status.latestRevision and `kubectl sidecarset pods` show them. Give
	// exactly one of revisionName and customVersion.
	// +optional
	RevisionName string `json:"revisionName,omitempty"`

	// customVersion picks the newest of the set's ControllerRevisions
	// labelled with this spec.customVersion
	// (sidecarset.dev/custom-version). Give exactly one of revisionName and
	// customVersion.
	// +optional
	CustomVersion string `json:"customVersion,omitempty"`

	// policy is Always (every new pod gets the named revision) or Partial
	// (a new pod gets the latest revision while the pods on it are fewer
	// than the rollout's target, the selected pods minus the partition, as
	// status counts them; the named one otherwise). While
	// updateStrategy.paused is true, Partial injects the named revision
	// too. Partial cannot be combined with updateStrategy.selector, whose
	// selected pods status does not count. Defaults to Always.
	// +optional
	// +kubebuilder:default=Always
	Policy InjectionRevisionPolicy `json:"policy,omitempty"`
}

// InjectionRevisionPolicy says which new pods get the named revision.
// +kubebuilder:validation:Enum=Always;Partial
type InjectionRevisionPolicy string

const (
	// InjectRevisionAlways gives every new pod the named revision.
	InjectRevisionAlways InjectionRevisionPolicy = "Always"
	// InjectRevisionPartial gives a new pod the latest revision while the
	// rollout's target leaves room for it, the named revision otherwise.
	InjectRevisionPartial InjectionRevisionPolicy = "Partial"
)

// UpdateStrategy controls how running pods move to the latest revision.
type UpdateStrategy struct {
	// type is RollingUpdate (update running pods in place, at the pace the
	// fields below set) or NotUpdate (leave running pods on their revision;
	// only new pods get the latest). Defaults to RollingUpdate.
	// +optional
	// +kubebuilder:default=RollingUpdate
	Type UpdateStrategyType `json:"type,omitempty"`

	// partition is how many matched pods (an integer, or "N%" of the matched
	// pods, rounded up) stay on their current revision; the others move to
	// the latest. With selector, it counts within the selected pods.
	// Defaults to 0, which updates every pod; 100% updates none.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:default=0
	Partition *intstr.IntOrString `json:"partition,omitempty"`

	// maxUnavailable is how many pods (an integer, or "N%" of the matched
	// pods, rounded up and never 0) may be updating or updated-but-not-ready
	// at once; a pod counts until it has been Ready for minReadySeconds.
	// Pods that were not ready before go first and do not count. At least 1
	// (or 1%); defaults to 1.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:default=1
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// paused, when true, stops updating running pods; status is still
	// kept. Defaults to false.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// selector limits the update to the matched pods it selects, by their
	// labels; the others stay on their revision. Unset, every matched pod
	// is updated.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// progressDeadlineSeconds is how long the rollout may go without progress
	// before it is marked Stalled and pauses itself. At least 1; defaults to
	// 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// minReadySeconds is how long a pod whose sidecars the rollout
	// restarted must stay Ready, every updated sidecar running in its new
	// container, before the pod stops counting against maxUnavailable and
	// its PodDisruptionBudgets and the next pod may go. It counts from the
	// later of the pod's Ready transition and the start of every updated
	// sidecar, as the node's clock reports them, so a sidecar that crashes
	// and restarts starts it again. A sidecar without a readiness probe is
	// Ready as soon as it runs: this wait is then all that catches a new
	// image that crashes. Defaults to 10 (Deployment's minReadySeconds
	// defaults to 0); 0 releases a pod as soon as it is Ready. Must be less
	// than progressDeadlineSeconds.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`

	// priorityStrategy orders the update by pod labels: pods that are not
	// ready still go first, then those of higher priority. The partition
	// keeps the last pods of this order.
	// +optional
	PriorityStrategy *UpdatePriorityStrategy `json:"priorityStrategy,omitempty"`

	// scatterStrategy spreads the pods each term matches evenly over the
	// update order, among pods of equal priority, so that consecutive
	// updates do not all fall in one zone, rack or shard. The places depend
	// on how many pods each term matches: pods added or removed can move the
	// pods still waiting, and with them which ones the partition keeps.
	// +optional
	// +listType=atomic
	ScatterStrategy []UpdateScatterTerm `json:"scatterStrategy,omitempty"`
}

// UpdatePriorityStrategy orders a rollout's pods by their labels. Only one
// of weightPriority and orderPriority may be set.
type UpdatePriorityStrategy struct {
	// weightPriority: a pod's priority is the sum of the weights of the terms
	// whose selector matches its labels; higher goes first. Only one of
	// weightPriority and orderPriority may be set.
	// +optional
	// +listType=atomic
	WeightPriority []UpdatePriorityWeightTerm `json:"weightPriority,omitempty"`

	// orderPriority: pods with the first key among their labels go first,
	// ordered by the number that ends the label's value, higher first
	// ("5" is 5, "shard-10" is 10; no number, or one above 2^63-1, is 0);
	// then the pods with the second key, and so on; pods with none of the
	// keys go last. Only one of weightPriority and orderPriority may be set.
	// +optional
	// +listType=atomic
	OrderPriority []UpdatePriorityOrderTerm `json:"orderPriority,omitempty"`
}

// UpdatePriorityWeightTerm adds weight to the priority of the pods its
// selector matches.
type UpdatePriorityWeightTerm struct {
	// weight, 1 to 100, is added to the priority of the pods matchSelector
	// selects.
	// +required
	Weight int32 `json:"weight"`

	// matchSelector selects the pods that get the weight, by their labels;
	// it must not be empty.
	// +required
	MatchSelector metav1.LabelSelector `json:"matchSelector"`
}

// UpdatePriorityOrderTerm orders pods by the number in one label.
type UpdatePriorityOrderTerm struct {
	// orderedKey is a label key: pods with it are ordered by the number
	// that ends its value, higher first.
	// +required
	OrderedKey string `json:"orderedKey"`
}

// UpdateScatterTerm names the pods, by one label, to spread over the update
// order.
type UpdateScatterTerm struct {
	// key is the label key of the pods to spread.
	// +required
	Key string `json:"key"`

	// value is the label value of the pods to spread.
	// +required
	Value string `json:"value"`
}

// SidecarSetSpec declares sidecars, which pods get them, and how running pods
// are updated.
// +kubebuilder:validation:XValidation:rule="has(self.selector)",message="a SidecarSet must say which pods it injects: give matchLabels or matchExpressions",fieldPath=".selector",reason="FieldValueRequired"
type SidecarSetSpec struct {
	// namespaceSelector selects, by their labels, the namespaces whose pods
	// are injected. When unset, every namespace. kube-system, kube-public,
	// kube-node-lease and the manager's own namespace are left out either
	// way unless the set has the annotation
	// sidecarset.dev/allow-system-namespaces: "true"; without it, a selector
	// that can match only those is refused.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// selector selects, by their labels, the pods the sidecars go into.
	// Required and not empty.
	// +kubebuilder:validation:Optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// containers are the regular sidecars, injected into the pod's
	// containers; into a pod meant to finish (restartPolicy Never or
	// OnFailure) they go as native sidecars unless jobPods is Keep.
	// +optional
	// +listType=map
	// +listMapKey=name
	Containers []SidecarContainer `json:"containers,omitempty"`

	// initContainers are injected into the pod's init containers; one with
	// restartPolicy: Always is a native sidecar, which runs beside the app
	// containers for the pod's whole life.
	// +optional
	// +listType=map
	// +listMapKey=name
	InitContainers []SidecarContainer `json:"initContainers,omitempty"`

	// volumes are merged into the pod by name; a pod volume of the same name
	// wins.
	// +optional
	// +listType=map
	// +listMapKey=name
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// imagePullSecrets are added to the pod's, except those it already
	// names.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// customVersion labels the ControllerRevision of this spec
	// (sidecarset.dev/custom-version), so that
	// injectionStrategy.revision.customVersion can name it; it must be a
	// label value. Changing it alone relabels the latest revision and
	// starts no rollout. A revision keeps the label it got, also after
	// customVersion changes again, and the newest revision with a label
	// wins a lookup.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	CustomVersion string `json:"customVersion,omitempty"`

	// injectionStrategy controls injection into new pods.
	// +optional
	InjectionStrategy InjectionStrategy `json:"injectionStrategy,omitempty"`

	// updateStrategy controls how running pods move to the latest revision.
	// +optional
	// +kubebuilder:default={}
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`

	// driftPolicy is Report or Revert: what happens when a managed sidecar's
	// image was changed by hand. Report counts the pod in
	// status.driftedPods and sets its condition SidecarSetDrifted; Revert
	// also writes the declared image back, within maxUnavailable. Defaults
	// to Report.
	// +optional
	// +kubebuilder:default=Report
	DriftPolicy DriftPolicy `json:"driftPolicy,omitempty"`

	// adoptionPolicy is Never or SameName: whether pods that carry a
	// same-named sidecar but no injection record are taken over. SameName
	// takes over a pod whose containers of the sidecars' names equal the
	// declared ones except the image. Defaults to Never.
	// +optional
	// +kubebuilder:default=Never
	AdoptionPolicy AdoptionPolicy `json:"adoptionPolicy,omitempty"`

	// patchPodMetadata writes annotations into the pods the set is injected
	// into, when it is injected: an in-place update of a running pod's
	// sidecars leaves its annotations as they are, and a change of
	// patchPodMetadata reaches new pods only. Like the selectors, changing
	// it makes no new revision, starts no rollout and makes no pod not
	// upgradable. Only keys the manager allows may be written
	// (--patch-pod-metadata-allowed-keys, none by default), never one under
	// sidecarset.dev/, and no key twice. Two sets that can select the same
	// pod may write the same key only with the same policy and value, or
	// both with MergePatchJson objects that set no member differently.
	// +optional
	// +listType=atomic
	PatchPodMetadata []PatchPodMetadata `json:"patchPodMetadata,omitempty"`

	// jobPods is NativeSidecar or Keep: how the regular containers go into a
	// pod whose restartPolicy is Never or OnFailure (a Job's), where a
	// regular sidecar would keep the pod running after its app exits.
	// NativeSidecar, the default, injects each of them there as a native
	// sidecar: an init container with restartPolicy Always, placed right
	// after the set's own BeforeAppContainer init containers, before the
	// pod's own init containers, whatever its podInjectPolicy (a native
	// sidecar always starts before the app containers). Keep injects them as
	// regular containers, with a warning. The pod's sidecarset.dev/state
	// annotation records which list each sidecar went into, and the rollout
	// updates it there; a change of jobPods reaches new pods only.
	// +optional
	// +kubebuilder:default=NativeSidecar
	JobPods JobPodsPolicy `json:"jobPods,omitempty"`

	// revisionHistoryLimit is how many old revisions (ControllerRevisions)
	// are kept, 0 or more. Revisions that some pod still runs are never
	// deleted. Defaults to 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// InjectionPath names what injects a SidecarSet into new pods.
// +kubebuilder:validation:Enum=Policy;Webhook;None
type InjectionPath string

const (
	// InjectionPolicy means a MutatingAdmissionPolicy the manager keeps for the
	// set injects it inside the apiserver, whether the manager runs or not.
	InjectionPolicy InjectionPath = "Policy"
	// InjectionWebhook means the manager's pod webhook injects the set.
	InjectionWebhook InjectionPath = "Webhook"
	// InjectionNone means nothing injects the set (injectionStrategy.paused).
	InjectionNone InjectionPath = "None"
)

// Reasons of status.injection.
const (
	// InjectionReasonPolicyInjects: the set's policy and binding are in
	// place and the apiserver has had time to load them.
	InjectionReasonPolicyInjects = "PolicyInjects"
	// InjectionReasonPolicyPending: the set's policy is written but the
	// apiserver may not apply it yet; the webhook keeps injecting meanwhile.
	InjectionReasonPolicyPending = "PolicyPending"
	// InjectionReasonWebhookMode: the manager runs with --injection=webhook.
	InjectionReasonWebhookMode = "WebhookMode"
	// InjectionReasonPolicyNotServed: --injection=auto and the apiserver
	// does not serve admissionregistration.k8s.io/v1
	// MutatingAdmissionPolicy.
	InjectionReasonPolicyNotServed = "PolicyNotServed"
	// InjectionReasonUnsupported: the set uses something a policy cannot
	// express; the message says what.
	InjectionReasonUnsupported = "Unsupported"
	// InjectionReasonPaused: injectionStrategy.paused.
	InjectionReasonPaused = "Paused"
)

// InjectionStatus says which path injects a SidecarSet into new pods, and
// why.
type InjectionStatus struct {
	// path is Policy (a MutatingAdmissionPolicy in the apiserver), Webhook
	// (the manager's pod webhook) or None (injection paused).
	// +required
	Path InjectionPath `json:"path"`

	// reason is a CamelCase word saying why the set is on this path:
	// PolicyInjects, PolicyPending, WebhookMode, PolicyNotServed,
	// Unsupported or Paused.
	// +required
	Reason string `json:"reason"`

	// message says why in a sentence, for a person.
	// +optional
	Message string `json:"message,omitempty"`

	// observedGeneration is the generation this path was decided for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// lastTransitionTime is when path last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// SidecarSetStatus reports how far the rollout got.
type SidecarSetStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// latestRevision names the ControllerRevision of the current spec, the
	// revision pods move to.
	// +optional
	LatestRevision string `json:"latestRevision,omitempty"`

	// matchedPods counts pods that match the selectors and carry this
	// SidecarSet's injection record: the pod annotations
	// sidecarset.dev/injected and sidecarset.dev/state that injection
	// writes.
	MatchedPods int32 `json:"matchedPods"`

	// updatedPods counts matched pods whose spec carries the latest
	// revision.
	UpdatedPods int32 `json:"updatedPods"`

	// readyPods counts matched pods that are Ready and whose sidecars all
	// run, healthy, the image last written into them, with no hot upgrade
	// under way.
	ReadyPods int32 `json:"readyPods"`

	// updatedReadyPods counts pods both updated and ready, and ready for
	// minReadySeconds since their last update: the in-place update
	// finished and is healthy.
	UpdatedReadyPods int32 `json:"updatedReadyPods"`

	// notUpgradablePods counts pods that need a recreate: something changed
	// that a running pod cannot take (beyond images and the cpu and memory
	// the apiserver resizes), or the kubelet holds a resize written into it.
	// They carry the pod condition SidecarSetUpgradable=False; `kubectl
	// sidecarset restart NAME --not-upgradable` recreates them.
	NotUpgradablePods int32 `json:"notUpgradablePods"`

	// driftedPods counts pods where a managed sidecar's image differs from
	// what the controller wrote: someone changed it by hand. They carry the
	// pod condition SidecarSetDrifted=True; see driftPolicy.
	DriftedPods int32 `json:"driftedPods"`

	// unmanagedPods counts pods that match but carry no injection record:
	// created before the set, while nothing injected it, or opted out with
	// the annotation sidecarset.dev/inject: "false".
	UnmanagedPods int32 `json:"unmanagedPods"`

	// skippedPods counts pods that match but into which this SidecarSet could
	// not be injected (a mounted volume the pod lacks, a port clash, the
	// namespace's Pod Security level): they were created without it, and
	// their sidecarset.dev/skipped annotation names it. An event on the
	// SidecarSet says why.
	// +optional
	SkippedPods int32 `json:"skippedPods"`

	// completedRevision names the last revision whose rollout completed. While
	// a rollout is stalled and paused itself, new pods are injected with this
	// revision rather than the failing latest one.
	// +optional
	CompletedRevision string `json:"completedRevision,omitempty"`

	// lastProgressTime is when the rollout last progressed;
	// progressDeadlineSeconds counts from it, also across restarts of the
	// manager.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`

	// releasedBefore: every in-place write the controller made into a pod
	// before this time is over. The pod came back from it (Ready for the
	// write's minReadySeconds, every written sidecar in its new container),
	// so should it fail later, that is not the write's disruption. Kept
	// here for all the set's pods at once, so that a pod's release costs
	// no write of the pod; the controller only moves it forward.
	// +optional
	ReleasedBefore *metav1.MicroTime `json:"releasedBefore,omitempty"`

	// injection says which path injects the set into new pods, and why.
	// +optional
	Injection *InjectionStatus `json:"injection,omitempty"`

	// conditions are Progressing (pods are being moved to the latest
	// revision), Complete (every pod the update strategy lets move is on
	// the latest revision and Ready for minReadySeconds) and Stalled (no
	// progress within progressDeadlineSeconds: the rollout paused itself).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SidecarSet declares sidecar containers once, injects them into matching new
// pods and rolls new sidecar images into running pods in place.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=scs
// +kubebuilder:printcolumn:name="MATCHED",type=integer,JSONPath=`.status.matchedPods`
// +kubebuilder:printcolumn:name="UPDATED",type=integer,JSONPath=`.status.updatedPods`
// +kubebuilder:printcolumn:name="READY",type=integer,JSONPath=`.status.readyPods`
// +kubebuilder:printcolumn:name="UPDATED-READY",type=integer,JSONPath=`.status.updatedReadyPods`
// +kubebuilder:printcolumn:name="NOT-UPGRADABLE",type=integer,JSONPath=`.status.notUpgradablePods`
// +kubebuilder:printcolumn:name="DRIFTED",type=integer,JSONPath=`.status.driftedPods`
// +kubebuilder:printcolumn:name="UNMANAGED",type=integer,JSONPath=`.status.unmanagedPods`
// +kubebuilder:printcolumn:name="SKIPPED",type=integer,JSONPath=`.status.skippedPods`,priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type SidecarSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the sidecars, which pods get them, and how running pods
	// are updated.
	// +required
	Spec SidecarSetSpec `json:"spec"`

	// status reports which pods carry the sidecars and how far the rollout
	// got; the manager writes it.
	// +optional
	Status SidecarSetStatus `json:"status,omitempty"`
}

// SidecarSetList is a list of SidecarSets.
//
// +kubebuilder:object:root=true
type SidecarSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SidecarSet `json:"items"`
}
