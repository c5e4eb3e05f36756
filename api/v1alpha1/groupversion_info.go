// Package v1alpha1 holds the sidecarset.dev/v1alpha1 API: the SidecarSet.
//
// It imports only k8s.io/apimachinery, so that the packages deciding without
// a cluster can use its types without pulling in a client.
//
// +kubebuilder:object:generate=true
// +groupName=sidecarset.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "sidecarset.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the SidecarSet and its list under GroupVersion,
// with the meta types (options, status) every group version carries.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &SidecarSet{}, &SidecarSetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
