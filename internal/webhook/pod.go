// Package webhook serves the admission webhooks: the pod mutator that injects
// sidecars, and the SidecarSet defaulter and validator. Each reads from the
// manager's informer cache only and leaves every decision to the pure
// packages internal/inject and internal/validation.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// PodMutatorPath is where the pod mutator is served.
const PodMutatorPath = "/mutate-v1-pod"

// MaxPodContainers bounds the containers and init containers of a pod the
// mutator looks at. A larger pod passes through untouched with a warning:
// injecting would make it larger still, and no real workload comes close.
const MaxPodContainers = 1000

// PodMutator injects the matching SidecarSets into pods being created.
type PodMutator struct {
	// Reader must be the informer cache: admission answers without calling
	// the apiserver, so a slow apiserver never slows pod creation further.
	Reader  client.Reader
	Options inject.Options
}

var _ admission.Handler = &PodMutator{}

// Handle answers one AdmissionReview for a pod.
func (m *PodMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	// Only CREATE is registered; anything else passes through untouched.
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err))
	}
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers); n > MaxPodContainers {
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"sidecarset: pod has %d containers, more than %d; no sidecar injected", n, MaxPodContainers))
	}
	// A pod created through a controller may not carry its namespace yet;
	// the request's namespace is authoritative.
	namespace := req.Namespace
	if namespace == "" {
		namespace = pod.Namespace
	}

	var sets v1alpha1.SidecarSetList
	if err := m.Reader.List(ctx, &sets); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list SidecarSets from cache: %w", err))
	}
	if len(sets.Items) == 0 {
		return admission.Allowed("")
	}
	ns := &corev1.Namespace{}
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		if !apierrors.IsNotFound(err) {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("get namespace %s from cache: %w", namespace, err))
		}
		ns = &corev1.Namespace{}
	}
	ns.Name = namespace

	ptrs := make([]*v1alpha1.SidecarSet, len(sets.Items))
	for i := range sets.Items {
		ptrs[i] = &sets.Items[i]
	}
	ptrs, fallbacks := m.withFallbacks(ctx, ptrs)
	res := inject.Inject(pod, ns, ptrs, m.Options)
	for _, name := range res.Injected {
		if w, ok := fallbacks[name]; ok {
			res.Warnings = append(res.Warnings, w)
		}
	}
	learned := recordAdmitted(res.Pod)
	if len(res.Injected) == 0 && !learned {
		return admission.Allowed("").WithWarnings(res.Warnings...)
	}
	out, err := json.Marshal(res.Pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode injected pod: %w", err))
	}
	ctrl.LoggerFrom(ctx).V(1).Info("injected sidecars", "pod", klog.KRef(namespace, podName(pod)),
		"sidecarSets", res.Injected, "recordedAdmittedImages", learned, "dryRun", req.DryRun != nil && *req.DryRun)
	return admission.PatchResponseFromRaw(req.Object.Raw, out).WithWarnings(res.Warnings...)
}

// recordAdmitted makes pod's records hold the sidecar images its spec
// carries now (rollout.RecordAdmitted) and reports whether they changed. On
// a reinvocation they do when a mutator that ran after the injection
// rewrote an image; the controller then sees no drift where nobody edited
// anything. A state that cannot be read was warned about by Inject.
func recordAdmitted(pod *corev1.Pod) bool {
	state, err := revision.Decode(pod.Annotations)
	if err != nil {
		return false
	}
	state, changed := rollout.RecordAdmitted(state, pod)
	if changed {
		pod.Annotations[v1alpha1.AnnotationState] = revision.Encode(state)
	}
	return changed
}

// podName names a pod for logs: pods of a controller often have only a
// generateName at admission.
func podName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName + "<generated>"
}
