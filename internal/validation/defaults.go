package validation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Defaults of the SidecarSet spec. The CRD schema carries the same values as
// markers; Default repeats them because a SidecarSet that does not come
// through the apiserver (kubectl sidecarset inject -f, tests) never sees the
// schema.
const (
	DefaultProgressDeadlineSeconds int32 = 600
	DefaultMinReadySeconds               = v1alpha1.DefaultMinReadySeconds
	DefaultRevisionHistoryLimit    int32 = 10
)

// Default fills in set every field left unset that has a default, in place.
// It is the only function of this package that modifies its argument, and it
// is idempotent. Fields already set are left alone, so defaulting an update
// never changes what the user wrote.
//
// Besides the SidecarSet's own fields it applies to each container and volume
// the defaults the apiserver applies to a pod's (pkg/apis/core/v1 defaulting
// in k8s.io/kubernetes, which this module cannot import). The injected
// container then equals, field for field, the one the pod ends up with after
// the apiserver has defaulted the pod, so comparing a declared container with
// a running one (adoption, drift, not-upgradable checks) sees no spurious
// differences, and the revision hashes cover the spec that really runs.
func Default(set *v1alpha1.SidecarSet) {
	spec := &set.Spec
	for i := range spec.Containers {
		defaultSidecar(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		defaultSidecar(&spec.InitContainers[i])
	}
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}

	us := &spec.UpdateStrategy
	if us.Type == "" {
		us.Type = v1alpha1.RollingUpdateStrategy
	}
	// Written out so that `kubectl get -o yaml` shows that a new SidecarSet
	// updates every matched pod at once; pin "100%" to start cautiously.
	if us.Partition == nil {
		us.Partition = ptr.To(intstr.FromInt32(0))
	}
	if us.MaxUnavailable == nil {
		us.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	}
	if us.ProgressDeadlineSeconds == nil {
		us.ProgressDeadlineSeconds = ptr.To(DefaultProgressDeadlineSeconds)
	}
	if us.MinReadySeconds == nil {
		us.MinReadySeconds = ptr.To(DefaultMinReadySeconds)
	}
	if spec.DriftPolicy == "" {
		spec.DriftPolicy = v1alpha1.DriftReport
	}
	if spec.AdoptionPolicy == "" {
		spec.AdoptionPolicy = v1alpha1.AdoptNever
	}
	if spec.JobPods == "" {
		spec.JobPods = v1alpha1.JobPodsNativeSidecar
	}
	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = ptr.To(DefaultRevisionHistoryLimit)
	}
	if r := spec.InjectionStrategy.Revision; r != nil && r.Policy == "" {
		r.Policy = v1alpha1.InjectRevisionAlways
	}
	for i := range spec.PatchPodMetadata {
		if p := &spec.PatchPodMetadata[i]; p.PatchPolicy == "" {
			p.PatchPolicy = v1alpha1.PatchRetain
		}
	}
}

func defaultSidecar(sc *v1alpha1.SidecarContainer) {
	if sc.PodInjectPolicy == "" {
		sc.PodInjectPolicy = v1alpha1.BeforeAppContainer
	}
	c := &sc.Container
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = revision.DefaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil {
			defaultFieldRef(vf.FieldRef)
			if vf.FileKeyRef != nil && vf.FileKeyRef.Optional == nil {
				vf.FileKeyRef.Optional = ptr.To(false)
			}
		}
	}
	defaultResources(&c.Resources)
	if p := sc.ResourcesPolicy; p != nil && p.TargetContainersNameRegex == "" {
		// As the CRD's default: every container of the pod's own.
		p.TargetContainersNameRegex = ".*"
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// defaultResources copies limits to requests that are not set, as the
// apiserver does for a pod's containers (a container with a memory limit
// requests that much), and rounds every quantity up to milli precision, as
// its ResourceList defaulting does.
func defaultResources(r *corev1.ResourceRequirements) {
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[name] = limit.DeepCopy()
	}
	for _, list := range []corev1.ResourceList{r.Limits, r.Requests} {
		for name, q := range list {
			q.RoundUp(-3)
			list[name] = q
		}
	}
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr.To("")
	}
}

func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

func defaultFieldRef(f *corev1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// defaultVolume applies the apiserver's defaults for the common volume types.
// Those of the deprecated in-tree cloud and storage plugins (iSCSI, RBD,
// AzureDisk, ScaleIO) are left to the apiserver: they only matter when two
// SidecarSets declare one such volume and spell its defaults differently.
func defaultVolume(v *corev1.Volume) {
	if len(setPointerFields(v.VolumeSource)) == 0 {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	if v.HostPath != nil && v.HostPath.Type == nil {
		v.HostPath.Type = ptr.To(corev1.HostPathUnset)
	}
	if v.Secret != nil && v.Secret.DefaultMode == nil {
		v.Secret.DefaultMode = ptr.To(corev1.SecretVolumeSourceDefaultMode)
	}
	if v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil {
		v.ConfigMap.DefaultMode = ptr.To(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if d := v.DownwardAPI; d != nil {
		if d.DefaultMode == nil {
			d.DefaultMode = ptr.To(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		for i := range d.Items {
			defaultFieldRef(d.Items[i].FieldRef)
		}
	}
	if p := v.Projected; p != nil {
		if p.DefaultMode == nil {
			p.DefaultMode = ptr.To(corev1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range p.Sources {
			s := &p.Sources[i]
			if s.DownwardAPI != nil {
				for j := range s.DownwardAPI.Items {
					defaultFieldRef(s.DownwardAPI.Items[j].FieldRef)
				}
			}
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
				s.ServiceAccountToken.ExpirationSeconds = ptr.To[int64](3600)
			}
		}
	}
}
