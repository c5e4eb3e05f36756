// Package scheme builds the runtime scheme every part of sidecarset uses: the
// built-in Kubernetes types and the SidecarSet API.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// New returns a scheme with the built-in types and the SidecarSet API.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	// Both only register static types; they fail only on a programming error.
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
