package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
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
// another SidecarSet, with the field path and the reason.
type SidecarSetValidator struct {
	// Reader must be the informer cache; the other SidecarSets come from it.
	Reader  client.Reader
	Options validation.Options
}

var _ admission.Validator[*v1alpha1.SidecarSet] = &SidecarSetValidator{}

// ValidateCreate validates a new SidecarSet against the existing ones.
func (v *SidecarSetValidator) ValidateCreate(ctx context.Context, set *v1alpha1.SidecarSet) (admission.Warnings, error) {
	others, err := v.others(ctx, set.Name)
	if err != nil {
		return nil, err
	}
	return nil, invalid(set, validation.ValidateCreate(set, others, v.Options))
}

// ValidateUpdate validates a changed SidecarSet against its old self and the
// other SidecarSets.
func (v *SidecarSetValidator) ValidateUpdate(ctx context.Context, oldSet, newSet *v1alpha1.SidecarSet) (admission.Warnings, error) {
	others, err := v.others(ctx, newSet.Name)
	if err != nil {
		return nil, err
	}
	return nil, invalid(newSet, validation.ValidateUpdate(oldSet, newSet, others, v.Options))
}

// ValidateDelete allows every delete: pods keep the sidecars they run.
func (v *SidecarSetValidator) ValidateDelete(context.Context, *v1alpha1.SidecarSet) (admission.Warnings, error) {
	return nil, nil
}

func (v *SidecarSetValidator) others(ctx context.Context, name string) ([]*v1alpha1.SidecarSet, error) {
	var list v1alpha1.SidecarSetList
	if err := v.Reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list SidecarSets from cache: %w", err)
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
