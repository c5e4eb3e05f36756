package webhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/validation"
)

// Paths controller-runtime derives for the SidecarSet webhooks.
const (
	SidecarSetDefaulterPath = "/mutate-sidecarset-dev-v1alpha1-sidecarset"
	SidecarSetValidatorPath = "/validate-sidecarset-dev-v1alpha1-sidecarset"
)

// SidecarSetDefaulter fills the defaults the CRD schema cannot express.
type SidecarSetDefaulter struct{}

var _ admission.Defaulter[*v1alpha1.SidecarSet] = SidecarSetDefaulter{}

// Default defaults set in place.
func (SidecarSetDefaulter) Default(_ context.Context, set *v1alpha1.SidecarSet) error {
	validation.Default(set)
	return nil
}

// SidecarSetValidator refuses invalid SidecarSets, and ones that conflict with
// another SidecarSet, with the field path and the reason. It gives the
// warnings that hold for a set whatever the pod (inject.SetWarnings) when the
// set is created and when what it puts into pods changes: the pod mutator
// does not repeat them on every pod.
type SidecarSetValidator struct {
	// Reader lists the other SidecarSets. It should read the apiserver, not
	// the informer cache: `kubectl apply` of a base and its canary, or of
	// two sets that conflict, sends them a moment apart, before the first
	// has reached the cache. SidecarSets change rarely, so the list is cheap.
	Reader client.Reader
	// APIWriter, when set, asks the apiserver's own pod validation about a
	// new or changed set's containers: a server-side dry-run create of
	// validation.ProbePod in the manager's namespace (default when
	// Options.ManagerNamespace is empty).
	APIWriter client.Writer
	Options   validation.Options
}

var _ admission.Validator[*v1alpha1.SidecarSet] = &SidecarSetValidator{}

// probeTimeout bounds the dry-run pod create; the apiserver gives the whole
// webhook call 5 seconds.
const probeTimeout = 2 * time.Second

// ValidateCreate validates a new SidecarSet against the existing ones, then
// its containers against the apiserver's pod validation. The set's warnings
// come with a refusal too, so that one round fixes everything.
func (v *SidecarSetValidator) ValidateCreate(ctx context.Context, set *v1alpha1.SidecarSet) (admission.Warnings, error) {
	others, err := v.others(ctx, set.Name)
	if err != nil {
		return nil, err
	}
	warnings := admission.Warnings(inject.SetWarnings(set))
	if errs := validation.ValidateCreate(set, others, v.Options); len(errs) > 0 {
		return warnings, invalid(set, errs)
	}
	probed, errs := v.probe(ctx, set)
	return append(warnings, probed...), invalid(set, errs)
}

// ValidateUpdate validates a changed SidecarSet against its old self and the
// other SidecarSets, and, when what it puts into pods changed, its containers
// against the apiserver's pod validation, with the set's warnings. Any other
// change (a partition, a pause) is never held up by that, however old the
// set, and draws no warning: `kubectl sidecarset rollout promote` would
// otherwise repeat them on every step.
func (v *SidecarSetValidator) ValidateUpdate(ctx context.Context, oldSet, newSet *v1alpha1.SidecarSet) (admission.Warnings, error) {
	others, err := v.others(ctx, newSet.Name)
	if err != nil {
		return nil, err
	}
	changed := revision.Hash(&oldSet.Spec) != revision.Hash(&newSet.Spec)
	var warnings admission.Warnings
	if changed {
		warnings = inject.SetWarnings(newSet)
	}
	if errs := validation.ValidateUpdate(oldSet, newSet, others, v.Options); len(errs) > 0 {
		return warnings, invalid(newSet, errs)
	}
	if !changed {
		return nil, nil
	}
	probed, errs := v.probe(ctx, newSet)
	return append(warnings, probed...), invalid(newSet, errs)
}

// probe dry-run creates set's probe pod and returns the apiserver's field
// errors about set's own fields. When the apiserver cannot be asked, or
// refuses the pod for another reason (a Pod Security level or a quota of
// the namespace, another admission webhook), set is accepted with a
// warning: an outage must not block SidecarSet changes.
func (v *SidecarSetValidator) probe(ctx context.Context, set *v1alpha1.SidecarSet) (admission.Warnings, field.ErrorList) {
	if v.APIWriter == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	pod := validation.ProbePod(set, cmp.Or(v.Options.ManagerNamespace, metav1.NamespaceDefault))
	err := v.APIWriter.Create(ctx, pod, client.DryRunAll)
	if err == nil {
		return nil, nil
	}
	var status apierrors.APIStatus
	if apierrors.IsInvalid(err) && errors.As(err, &status) && status.Status().Details != nil {
		errs, other := validation.ProbeErrors(set, status.Status().Details.Causes)
		if len(errs) > 0 {
			return nil, errs
		}
		err = errors.New(strings.Join(other, "; "))
	}
	ctrl.LoggerFrom(ctx).Info("SidecarSet accepted without the apiserver's pod validation", "sidecarSet", set.Name, "err", err.Error())
	return admission.Warnings{fmt.Sprintf(
		"sidecarset: this SidecarSet's containers were not checked by the apiserver's pod validation (dry-run create of a pod in namespace %s: %v)", pod.Namespace, err)}, nil
}

// ValidateDelete allows every delete: pods keep the sidecars they run.
func (v *SidecarSetValidator) ValidateDelete(context.Context, *v1alpha1.SidecarSet) (admission.Warnings, error) {
	return nil, nil
}

// listBackoff retries a list of the other sets that failed transiently: 4
// tries, 0.7 s of waits between them. One failed list would otherwise
// refuse the user's change.
var listBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 4}

// listTimeout bounds the list with its retries, so that it and the probe
// (probeTimeout) fit in the 5 s the apiserver gives the webhook call.
const listTimeout = 2 * time.Second

// transientList reports whether a list that failed with err may succeed when
// tried again at once: the apiserver was busy, timed out or failed inside.
// A refusal (forbidden, not found) is final.
func transientList(err error) bool {
	var status apierrors.APIStatus
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		(errors.As(err, &status) && status.Status().Code >= http.StatusInternalServerError)
}

func (v *SidecarSetValidator) others(ctx context.Context, name string) ([]*v1alpha1.SidecarSet, error) {
	var list v1alpha1.SidecarSetList
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	err := retry.OnError(listBackoff, transientList, func() error {
		return v.Reader.List(ctx, &list)
	})
	if err != nil {
		return nil, fmt.Errorf("list SidecarSets: %w", err)
	}
	others := make([]*v1alpha1.SidecarSet, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].Name != name {
			others = append(others, &list.Items[i])
		}
	}
	return others, nil
}

func invalid(set *v1alpha1.SidecarSet, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("SidecarSet").GroupKind(), set.Name, errs)
}
