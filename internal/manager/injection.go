package manager

import (
	"fmt"
	"slices"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/sidecarset/sidecarset/internal/status"
)

// Injection is how the manager has new pods injected, the --injection flag.
type Injection string

const (
	// InjectionPolicy compiles every SidecarSet into a
	// MutatingAdmissionPolicy that injects it inside the apiserver, with no
	// call to the manager; a set a policy cannot express stays on the
	// webhook, and its status says why. The apiserver must serve
	// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy.
	InjectionPolicy Injection = "policy"
	// InjectionWebhook injects every set through the pod webhook, and
	// removes the policies an earlier policy or auto run left.
	InjectionWebhook Injection = "webhook"
	// InjectionAuto is policy where the apiserver serves
	// MutatingAdmissionPolicy v1, webhook elsewhere.
	InjectionAuto Injection = "auto"
)

// Injections lists the values --injection takes.
var Injections = []Injection{InjectionPolicy, InjectionWebhook, InjectionAuto}

// String and Set make an Injection a flag.Value.
func (i *Injection) String() string { return string(*i) }

// Set parses one of Injections.
func (i *Injection) Set(s string) error {
	if !slices.Contains(Injections, Injection(s)) {
		return fmt.Errorf("%q: want one of %v", s, Injections)
	}
	*i = Injection(s)
	return nil
}

// mapGroupVersion and mapResource are what the apiserver must serve for the
// policy path.
const (
	mapGroupVersion = "admissionregistration.k8s.io/v1"
	mapResource     = "mutatingadmissionpolicies"
	mapBindings     = "mutatingadmissionpolicybindings"
)

// resolveInjection turns the --injection value into the mode the policy
// controller runs in, asking the apiserver's discovery whether it serves
// MutatingAdmissionPolicy v1 and its bindings (served).
func resolveInjection(cfg *rest.Config, injection Injection) (mode status.Mode, served bool, err error) {
	served, err = policiesServed(cfg)
	if err != nil {
		return "", false, err
	}
	switch {
	case injection == InjectionWebhook:
		// Where policies are served, those an earlier run left are removed.
		return status.ModeWebhook, served, nil
	case served:
		return status.ModePolicy, true, nil
	case injection == InjectionAuto:
		return status.ModeNotServed, false, nil
	default:
		return "", false, fmt.Errorf("--injection=%s: the apiserver does not serve %s %s and %s (Kubernetes 1.36 or later); use --injection=auto or webhook",
			injection, mapGroupVersion, mapResource, mapBindings)
	}
}

// policiesServed asks discovery whether the apiserver serves
// MutatingAdmissionPolicy v1 and its bindings.
func policiesServed(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("discovery client: %w", err)
	}
	list, err := dc.ServerResourcesForGroupVersion(mapGroupVersion)
	if err != nil {
		return false, fmt.Errorf("discover %s (whether MutatingAdmissionPolicy is served, for --injection): %w", mapGroupVersion, err)
	}
	var policies, bindings bool
	for _, r := range list.APIResources {
		policies = policies || r.Name == mapResource
		bindings = bindings || r.Name == mapBindings
	}
	return policies && bindings, nil
}
