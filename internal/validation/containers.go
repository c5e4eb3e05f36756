package validation

// The container checks below re-implement part of the apiserver's pod
// validation rather than calling it. That validation lives in
// k8s.io/kubernetes/pkg/apis/core/validation, works on the internal core
// types (so it also needs the conversion code), and is not published as a
// staging module: none of the modules this project depends on (k8s.io/api,
// apimachinery, client-go, component-helpers, controller-runtime) carries it,
// and k8s.io/kubernetes is not meant to be imported as a library. The checks
// here are the ones a sidecar commonly gets wrong, with the apiserver's field
// paths, error types and limits. Anything they miss is still refused by the
// apiserver, but only when a pod with the sidecar injected is created: the pod
// is refused, not the SidecarSet. That is why even rules the apiserver would
// catch are checked here.
//
// Not checked here: securityContext, resizePolicy, volumeDevices beyond names,
// hostPort conflicts, and extended-resource and hugepage rules.

import (
	"fmt"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/inject/resourceexpr"
)

// validateContainers checks spec.containers and spec.initContainers. Names
// must be unique across both lists because they share one namespace in a pod.
func validateContainers(spec *v1alpha1.SidecarSetSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Containers) == 0 && len(spec.InitContainers) == 0 {
		errs = append(errs, field.Required(fld.Child("containers"), "a SidecarSet must declare at least one container or init container"))
	}
	names := sets.New[string]()
	checkName := func(name string, p *field.Path) {
		if names.Has(name) {
			errs = append(errs, field.Duplicate(p, name))
		} else if name != "" {
			names.Insert(name)
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		p := fld.Child("containers").Index(i)
		errs = append(errs, validateContainer(c, p)...)
		errs = append(errs, validateRegularContainer(&c.Container, p)...)
		errs = append(errs, validateHotUpgrade(c, p)...)
		for _, name := range c.PodNames() {
			checkName(name, p.Child("name"))
		}
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		p := fld.Child("initContainers").Index(i)
		errs = append(errs, validateContainer(c, p)...)
		errs = append(errs, validateInitContainer(&c.Container, p)...)
		if c.ResourcesPolicy != nil && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
			// A plain init container has finished before the app starts:
			// sized after it, it would only hold the pod's start back.
			errs = append(errs, field.Forbidden(p.Child("resourcesPolicy"), "needs restartPolicy: Always (a native sidecar)"))
		}
		if c.Hot() {
			errs = append(errs, field.Forbidden(p.Child("upgradeStrategy", "upgradeType"),
				"HotUpgrade is for regular sidecars (containers): an init container runs once, and a native sidecar is declared and updated alone"))
		}
		checkName(c.Name, p.Child("name"))
	}
	return errs
}

// validateHotUpgrade checks a regular sidecar's upgradeStrategy.
func validateHotUpgrade(sc *v1alpha1.SidecarContainer, container *field.Path) field.ErrorList {
	u := sc.UpgradeStrategy
	if u == nil {
		return nil
	}
	fld := container.Child("upgradeStrategy")
	errs := validateEnum(u.UpgradeType, []v1alpha1.UpgradeType{v1alpha1.ColdUpgrade, v1alpha1.HotUpgrade}, fld.Child("upgradeType"))
	empty := fld.Child("hotUpgradeEmptyImage")
	if !sc.Hot() {
		if u.HotUpgradeEmptyImage != "" {
			errs = append(errs, field.Forbidden(empty, "only with upgradeType HotUpgrade"))
		}
		return errs
	}
	switch {
	case u.HotUpgradeEmptyImage == "":
		errs = append(errs, field.Required(empty, "HotUpgrade needs an image for the idle container: one that stays running, passes the sidecar's probes and hooks, and does nothing else"))
	case strings.TrimSpace(u.HotUpgradeEmptyImage) != u.HotUpgradeEmptyImage:
		errs = append(errs, field.Invalid(empty, u.HotUpgradeEmptyImage, "must not have leading or trailing whitespace"))
	case u.HotUpgradeEmptyImage == sc.Image:
		// The idle slot would run the sidecar itself, as a second
		// version that never learnt it must take over.
		errs = append(errs, field.Invalid(empty, u.HotUpgradeEmptyImage, "must differ from image"))
	}
	if len(sc.Name) > utilvalidation.DNS1123LabelMaxLength-2 {
		// Its containers are NAME-1 and NAME-2.
		errs = append(errs, field.TooLong(container.Child("name"), sc.Name, utilvalidation.DNS1123LabelMaxLength-2))
	}
	for i, p := range sc.Ports {
		if p.HostPort != 0 {
			errs = append(errs, field.Forbidden(container.Child("ports").Index(i).Child("hostPort"),
				"a HotUpgrade sidecar runs as two containers, and a pod can bind a hostPort once"))
		}
	}
	return errs
}

// validateRegularContainer applies the rules for spec.containers.
func validateRegularContainer(c *corev1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.RestartPolicy != nil {
		// The apiserver accepts a restartPolicy on regular containers only
		// behind the alpha ContainerRestartRules gate; a SidecarSet has one
		// meaning for it, the native sidecar, which belongs under initContainers.
		errs = append(errs, field.Forbidden(fld.Child("restartPolicy"),
			"may not be set on a regular sidecar: to make a native sidecar, declare it under initContainers with restartPolicy: Always"))
	}
	errs = append(errs, validateProbe(c.LivenessProbe, true, fld.Child("livenessProbe"))...)
	errs = append(errs, validateProbe(c.ReadinessProbe, false, fld.Child("readinessProbe"))...)
	errs = append(errs, validateProbe(c.StartupProbe, true, fld.Child("startupProbe"))...)
	errs = append(errs, validateLifecycle(c.Lifecycle, fld.Child("lifecycle"))...)
	return errs
}

// validateInitContainer applies the rules for spec.initContainers: either a
// plain init container, which runs to completion before the app starts, or a
// native sidecar (restartPolicy: Always), which keeps running beside it.
func validateInitContainer(c *corev1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.RestartPolicy != nil && *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		// Never and OnFailure only mean something with the alpha
		// ContainerRestartRules; without them the apiserver allows only Always.
		errs = append(errs, field.NotSupported(fld.Child("restartPolicy"), *c.RestartPolicy,
			[]corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
	}
	if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
		errs = append(errs, validateProbe(c.LivenessProbe, true, fld.Child("livenessProbe"))...)
		errs = append(errs, validateProbe(c.ReadinessProbe, false, fld.Child("readinessProbe"))...)
		errs = append(errs, validateProbe(c.StartupProbe, true, fld.Child("startupProbe"))...)
		errs = append(errs, validateLifecycle(c.Lifecycle, fld.Child("lifecycle"))...)
		return errs
	}
	// The kubelet never probes a plain init container nor runs its hooks: it
	// only waits for it to exit. The apiserver refuses them for that reason.
	const notNative = "may not be set for init containers without restartPolicy: Always"
	if c.LivenessProbe != nil {
		errs = append(errs, field.Forbidden(fld.Child("livenessProbe"), notNative))
	}
	if c.ReadinessProbe != nil {
		errs = append(errs, field.Forbidden(fld.Child("readinessProbe"), notNative))
	}
	if c.StartupProbe != nil {
		errs = append(errs, field.Forbidden(fld.Child("startupProbe"), notNative))
	}
	if c.Lifecycle != nil {
		errs = append(errs, field.Forbidden(fld.Child("lifecycle"), notNative))
	}
	return errs
}

// validateContainer applies the rules common to every sidecar.
func validateContainer(sc *v1alpha1.SidecarContainer, fld *field.Path) field.ErrorList {
	c := &sc.Container
	errs := validateDNSLabel(c.Name, fld.Child("name"))
	switch {
	case c.Image == "":
		errs = append(errs, field.Required(fld.Child("image"), "a sidecar needs an image"))
	case strings.TrimSpace(c.Image) != c.Image:
		// The container runtime would try to pull the name with the spaces.
		errs = append(errs, field.Invalid(fld.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	errs = append(errs, validateEnum(sc.PodInjectPolicy,
		[]v1alpha1.PodInjectPolicy{v1alpha1.BeforeAppContainer, v1alpha1.AfterAppContainer}, fld.Child("podInjectPolicy"))...)
	errs = append(errs, validateEnum(c.ImagePullPolicy,
		[]corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}, fld.Child("imagePullPolicy"))...)
	errs = append(errs, validateEnum(c.TerminationMessagePolicy,
		[]corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}, fld.Child("terminationMessagePolicy"))...)
	if len(c.RestartPolicyRules) > 0 {
		// Rules need a restartPolicy other than Always on an init container,
		// or one on a regular container; neither is allowed above.
		errs = append(errs, field.Forbidden(fld.Child("restartPolicyRules"), "are not supported in a SidecarSet"))
	}
	errs = append(errs, validatePorts(c.Ports, fld.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, fld.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, fld.Child("envFrom"))...)
	errs = append(errs, validateResources(&c.Resources, fld.Child("resources"))...)
	errs = append(errs, validateSharePolicy(sc.ShareVolumePolicy, fld.Child("shareVolumePolicy"))...)
	errs = append(errs, validateSharePolicy(sc.ShareVolumeDevicePolicy, fld.Child("shareVolumeDevicePolicy"))...)
	errs = append(errs, validateTransferEnv(sc, fld.Child("transferEnv"))...)
	errs = append(errs, validateResourcesPolicy(sc, fld)...)
	errs = append(errs, validateVolumeMounts(c.VolumeMounts, fld.Child("volumeMounts"))...)
	for i, d := range c.VolumeDevices {
		p := fld.Child("volumeDevices").Index(i)
		if d.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		if d.DevicePath == "" {
			errs = append(errs, field.Required(p.Child("devicePath"), ""))
		}
	}
	return errs
}

func validatePorts(ports []corev1.ContainerPort, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		p := fld.Index(i)
		for _, msg := range utilvalidation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range utilvalidation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		if port.Name != "" {
			// Probes and Services refer to ports by name, so a name must be
			// an IANA service name and unique within the container.
			for _, msg := range utilvalidation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
			}
			if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		errs = append(errs, validateEnum(port.Protocol,
			[]corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}, p.Child("protocol"))...)
	}
	return errs
}

func validateEnv(env []corev1.EnvVar, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range env {
		p := fld.Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			// The apiserver accepts any printable ASCII but '=' since
			// RelaxedEnvironmentVariableValidation went GA; being stricter
			// would refuse sidecars that pods accept.
			for _, msg := range utilvalidation.IsRelaxedEnvVarName(ev.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), ev.Name, msg))
			}
		}
		if ev.ValueFrom == nil {
			continue
		}
		vp := p.Child("valueFrom")
		if ev.Value != "" {
			errs = append(errs, field.Invalid(vp, "", "may not be specified when `value` is not empty"))
		}
		sources := setPointerFields(*ev.ValueFrom)
		switch len(sources) {
		case 0:
			errs = append(errs, field.Invalid(vp, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`"))
		case 1:
		default:
			errs = append(errs, field.Invalid(vp, "", "may not have more than one field specified at a time: "+strings.Join(sources, ", ")))
		}
		vf := ev.ValueFrom
		if vf.FieldRef != nil && vf.FieldRef.FieldPath == "" {
			errs = append(errs, field.Required(vp.Child("fieldRef", "fieldPath"), ""))
		}
		if vf.ResourceFieldRef != nil && vf.ResourceFieldRef.Resource == "" {
			errs = append(errs, field.Required(vp.Child("resourceFieldRef", "resource"), ""))
		}
		if r := vf.ConfigMapKeyRef; r != nil {
			errs = append(errs, validateKeyRef(r.Name, r.Key, vp.Child("configMapKeyRef"))...)
		}
		if r := vf.SecretKeyRef; r != nil {
			errs = append(errs, validateKeyRef(r.Name, r.Key, vp.Child("secretKeyRef"))...)
		}
	}
	return errs
}

func validateKeyRef(name, key string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(fld.Child("name"), ""))
	}
	if key == "" {
		errs = append(errs, field.Required(fld.Child("key"), ""))
	} else {
		for _, msg := range utilvalidation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(fld.Child("key"), key, msg))
		}
	}
	return errs
}

func validateEnvFrom(envFrom []corev1.EnvFromSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ef := range envFrom {
		p := fld.Index(i)
		switch sources := setPointerFields(ef); len(sources) {
		case 0:
			errs = append(errs, field.Invalid(p, "", "must specify one of: `configMapRef` or `secretRef`"))
		case 1:
		default:
			errs = append(errs, field.Invalid(p, "", "may not have more than one field specified at a time: "+strings.Join(sources, ", ")))
		}
	}
	return errs
}

func validateResources(r *corev1.ResourceRequirements, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(list corev1.ResourceList, p *field.Path) {
		for _, name := range sets.List(sets.KeySet(list)) {
			q := list[name]
			for _, msg := range utilvalidation.IsQualifiedName(string(name)) {
				errs = append(errs, field.Invalid(p.Key(string(name)), name, msg))
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(p.Key(string(name)), q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	check(r.Limits, fld.Child("limits"))
	check(r.Requests, fld.Child("requests"))
	for _, name := range sets.List(sets.KeySet(r.Requests)) {
		req := r.Requests[name]
		limit, ok := r.Limits[name]
		if ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(fld.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

// validateVolumeMounts checks mounts on their own. A mount need not name a
// volume of the SidecarSet: a sidecar may mount a volume of the pod it joins
// (an exporter reading the database's data volume), which only the injector
// can check, pod by pod.
func validateVolumeMounts(mounts []corev1.VolumeMount, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		p := fld.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		switch {
		case m.MountPath == "":
			errs = append(errs, field.Required(p.Child("mountPath"), ""))
		case paths.Has(m.MountPath):
			errs = append(errs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		default:
			paths.Insert(m.MountPath)
		}
		if m.SubPath != "" {
			errs = append(errs, validateRelativePath(m.SubPath, p.Child("subPath"))...)
		}
		if m.MountPropagation != nil {
			errs = append(errs, validateEnum(*m.MountPropagation,
				[]corev1.MountPropagationMode{corev1.MountPropagationNone, corev1.MountPropagationHostToContainer, corev1.MountPropagationBidirectional},
				p.Child("mountPropagation"))...)
		}
	}
	return errs
}

// validateRelativePath keeps a subPath inside its volume.
func validateRelativePath(sub string, fld *field.Path) field.ErrorList {
	if path.IsAbs(sub) {
		return field.ErrorList{field.Invalid(fld, sub, "must be a relative path")}
	}
	for _, elem := range strings.Split(sub, "/") {
		if elem == ".." {
			return field.ErrorList{field.Invalid(fld, sub, "must not contain '..'")}
		}
	}
	return nil
}

// validateProbe checks a probe of a container that may have one.
// requireOneSuccess is set for liveness and startup probes, which the kubelet
// treats as passed after a single success.
func validateProbe(probe *corev1.Probe, requireOneSuccess bool, fld *field.Path) field.ErrorList {
	if probe == nil {
		return nil
	}
	errs := validateHandler(probe.ProbeHandler, fld)
	for _, f := range []struct {
		name  string
		value int32
	}{
		{"initialDelaySeconds", probe.InitialDelaySeconds},
		{"timeoutSeconds", probe.TimeoutSeconds},
		{"periodSeconds", probe.PeriodSeconds},
		{"successThreshold", probe.SuccessThreshold},
		{"failureThreshold", probe.FailureThreshold},
	} {
		if f.value < 0 {
			errs = append(errs, field.Invalid(fld.Child(f.name), f.value, "must be greater than or equal to 0"))
		}
	}
	// 0 is defaulted to 1.
	if requireOneSuccess && probe.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(fld.Child("successThreshold"), probe.SuccessThreshold, "must be 1"))
	}
	if g := probe.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(fld.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	return errs
}

// validateHandler requires exactly one of a probe's handlers.
func validateHandler(h corev1.ProbeHandler, fld *field.Path) field.ErrorList {
	errs := exactlyOne(setPointerFields(h), fld)
	if h.HTTPGet != nil {
		errs = append(errs, validateHTTPGet(h.HTTPGet, fld.Child("httpGet"))...)
	}
	if h.TCPSocket != nil {
		errs = append(errs, validatePortRef(h.TCPSocket.Port, fld.Child("tcpSocket", "port"))...)
	}
	if h.GRPC != nil {
		for _, msg := range utilvalidation.IsValidPortNum(int(h.GRPC.Port)) {
			errs = append(errs, field.Invalid(fld.Child("grpc", "port"), h.GRPC.Port, msg))
		}
	}
	return errs
}

func validateLifecycle(l *corev1.Lifecycle, fld *field.Path) field.ErrorList {
	if l == nil {
		return nil
	}
	var errs field.ErrorList
	for _, hook := range []struct {
		name    string
		handler *corev1.LifecycleHandler
	}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
		if hook.handler == nil {
			continue
		}
		p := fld.Child(hook.name)
		errs = append(errs, exactlyOne(setPointerFields(*hook.handler), p)...)
		if hook.handler.HTTPGet != nil {
			errs = append(errs, validateHTTPGet(hook.handler.HTTPGet, p.Child("httpGet"))...)
		}
		if hook.handler.TCPSocket != nil {
			errs = append(errs, validatePortRef(hook.handler.TCPSocket.Port, p.Child("tcpSocket", "port"))...)
		}
		if s := hook.handler.Sleep; s != nil && s.Seconds < 0 {
			errs = append(errs, field.Invalid(p.Child("sleep", "seconds"), s.Seconds, "must be greater than or equal to 0"))
		}
	}
	return errs
}

// exactlyOne reports a handler that names none or several actions; set
// holds the JSON names of the actions given.
func exactlyOne(set []string, fld *field.Path) field.ErrorList {
	switch len(set) {
	case 0:
		return field.ErrorList{field.Required(fld, "must specify a handler type")}
	case 1:
		return nil
	default:
		return field.ErrorList{field.Forbidden(fld.Child(set[1]), "may not specify more than 1 handler type")}
	}
}

func validateHTTPGet(h *corev1.HTTPGetAction, fld *field.Path) field.ErrorList {
	errs := validatePortRef(h.Port, fld.Child("port"))
	errs = append(errs, validateEnum(h.Scheme, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}, fld.Child("scheme"))...)
	return errs
}

// validatePortRef checks a probe's or hook's port: a number, or the name of
// one of the container's ports.
func validatePortRef(port intstr.IntOrString, fld *field.Path) field.ErrorList {
	var msgs []string
	if port.Type == intstr.String {
		msgs = utilvalidation.IsValidPortName(port.StrVal)
	} else {
		msgs = utilvalidation.IsValidPortNum(port.IntValue())
	}
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(fld, port.String(), msg))
	}
	return errs
}

// setPointerFields returns the JSON names of the non-nil pointer fields of
// the struct v, in declaration order. API unions (volume sources, probe
// handlers, env sources) are structs of optional pointers of which exactly one
// is meant to be set; reflection keeps the check correct when a Kubernetes
// release adds a member.
func setPointerFields(v any) []string {
	rv := reflect.ValueOf(v)
	rt := rv.Type()
	var set []string
	for i := range rt.NumField() {
		f := rv.Field(i)
		if f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		set = append(set, name)
	}
	return set
}

func validateSharePolicy(p *v1alpha1.SharePolicy, fld *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	valid := []v1alpha1.SharePolicyType{v1alpha1.SharePolicyEnabled, v1alpha1.SharePolicyDisabled}
	if p.Type == "" {
		return field.ErrorList{field.Required(fld.Child("type"), "one of enabled, disabled")}
	}
	return validateEnum(p.Type, valid, fld.Child("type"))
}

// validateTransferEnv checks that each entry names its source container one
// way and its variables one way, with a pod field injection can read, and
// no variable the sidecar declares itself: which of the two it would get
// could not be told from the set.
func validateTransferEnv(sc *v1alpha1.SidecarContainer, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range sc.TransferEnv {
		p := fld.Index(i)
		from := t.SourceContainerNameFrom
		switch {
		case t.SourceContainerName == "" && from == nil:
			errs = append(errs, field.Required(p, "one of sourceContainerName and sourceContainerNameFrom"))
		case t.SourceContainerName != "" && from != nil:
			errs = append(errs, field.Invalid(p, "", "only one of sourceContainerName and sourceContainerNameFrom may be set"))
		case t.SourceContainerName != "":
			errs = append(errs, validateDNSLabel(t.SourceContainerName, p.Child("sourceContainerName"))...)
		case from.FieldRef == nil:
			errs = append(errs, field.Required(p.Child("sourceContainerNameFrom", "fieldRef"), ""))
		case !inject.PodFieldPathSupported(from.FieldRef.FieldPath):
			errs = append(errs, field.NotSupported(p.Child("sourceContainerNameFrom", "fieldRef", "fieldPath"), from.FieldRef.FieldPath,
				[]string{"metadata.name", "metadata.namespace", "metadata.labels['KEY']", "metadata.annotations['KEY']"}))
		}
		if from != nil && from.FieldRef != nil && from.FieldRef.APIVersion != "" && from.FieldRef.APIVersion != "v1" {
			errs = append(errs, field.NotSupported(p.Child("sourceContainerNameFrom", "fieldRef", "apiVersion"), from.FieldRef.APIVersion, []string{"v1"}))
		}
		names := t.EnvNames
		np := p.Child("envNames")
		switch {
		case t.EnvName == "" && t.EnvNames == nil:
			errs = append(errs, field.Required(p, "one of envName and envNames"))
		case t.EnvName != "" && t.EnvNames != nil:
			errs = append(errs, field.Invalid(p, "", "only one of envName and envNames may be set"))
		case t.EnvName != "":
			names, np = []string{t.EnvName}, p.Child("envName")
		case len(t.EnvNames) == 0:
			errs = append(errs, field.Required(np, "at least one name"))
		}
		for j, name := range names {
			ep := np
			if t.EnvName == "" {
				ep = np.Index(j)
			}
			if name == "" {
				errs = append(errs, field.Required(ep, ""))
				continue
			}
			if slices.ContainsFunc(sc.Env, func(e corev1.EnvVar) bool { return e.Name == name }) {
				errs = append(errs, field.Invalid(ep, name, "the container's env declares this variable too; drop one of them"))
			}
		}
	}
	return errs
}

// validateResourcesPolicy checks sc's resourcesPolicy: no fixed resources
// beside it, a mode, a regex Go compiles (the webhook matches with Go's
// regexp, RE2), and expressions that parse, at least one; with
// keepQoSClass, one for cpu and one for memory.
func validateResourcesPolicy(sc *v1alpha1.SidecarContainer, fld *field.Path) field.ErrorList {
	p := sc.ResourcesPolicy
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	pf := fld.Child("resourcesPolicy")
	if len(sc.Resources.Requests) > 0 || len(sc.Resources.Limits) > 0 {
		errs = append(errs, field.Forbidden(fld.Child("resources"), "may not be set with resourcesPolicy, which computes them at injection"))
	}
	if p.TargetContainersMode == "" {
		errs = append(errs, field.Required(pf.Child("targetContainersMode"), "one of sum, max"))
	} else {
		errs = append(errs, validateEnum(p.TargetContainersMode,
			[]v1alpha1.TargetContainersMode{v1alpha1.TargetContainersModeSum, v1alpha1.TargetContainersModeMax}, pf.Child("targetContainersMode"))...)
	}
	if _, err := regexp.Compile(p.TargetContainersNameRegex); err != nil {
		errs = append(errs, field.Invalid(pf.Child("targetContainersNameRegex"), p.TargetContainersNameRegex, err.Error()))
	}
	ef := pf.Child("resourcesExpr")
	has := map[corev1.ResourceName]bool{}
	for _, part := range []struct {
		name  string
		exprs *v1alpha1.ResourceExpressions
	}{{"limits", p.ResourcesExpr.Limits}, {"requests", p.ResourcesExpr.Requests}} {
		if part.exprs == nil {
			continue
		}
		for _, res := range []struct {
			name corev1.ResourceName
			expr string
		}{{corev1.ResourceCPU, part.exprs.CPU}, {corev1.ResourceMemory, part.exprs.Memory}} {
			if res.expr == "" {
				continue
			}
			has[res.name] = true
			if _, err := resourceexpr.Parse(res.expr, string(res.name)); err != nil {
				errs = append(errs, field.Invalid(ef.Child(part.name, string(res.name)), res.expr, err.Error()))
			}
		}
	}
	if len(has) == 0 {
		errs = append(errs, field.Required(ef, "at least one expression under limits or requests"))
	}
	if p.KeepQoSClass {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if !has[name] {
				errs = append(errs, field.Required(ef, fmt.Sprintf("keepQoSClass needs a %s expression under limits or requests: a Guaranteed pod needs cpu and memory limits on every container", name)))
			}
		}
	}
	return errs
}
