// Package policyrbac declares the permissions the manager needs beyond its
// own role to inject by policy (--injection=policy or auto): creating and
// updating the MutatingAdmissionPolicy and binding of each SidecarSet.
// controller-gen generates them into config/rbac/policy (make manifests) as
// the ClusterRole sidecarset-manager-policy, which the chart grants only
// with injection policy or auto. They are kept apart because a resource
// name cannot limit them: the objects are created as sets come and go.
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingadmissionpolicies;mutatingadmissionpolicybindings,verbs=create;update
package policyrbac
