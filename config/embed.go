// Package config embeds the manifests so that binaries (the playground) and
// tests install exactly what is checked in, wherever they run.
package config

import "embed"

// CRDs holds the CustomResourceDefinitions generated from api/.
//
//go:embed crd/*.yaml
var CRDs embed.FS

// Webhooks holds the webhook configurations, pointing at the in-cluster
// service; local environments rewrite the client configs.
//
//go:embed webhook/manifests.yaml
var Webhooks []byte

// RBAC holds the manager's ClusterRole and Role, generated from the
// +kubebuilder:rbac markers in internal/manager.
//
//go:embed rbac/role.yaml
var RBAC []byte

// PolicyRBAC holds the ClusterRole that injection by policy needs on top of
// RBAC, generated from the marker in internal/manager/policyrbac.
//
//go:embed rbac/policy/role.yaml
var PolicyRBAC []byte

// AdmissionPolicy holds the optional ValidatingAdmissionPolicy and its
// binding that refuse privileged and host-access sidecars; the chart ships a
// copy (admissionPolicy.enabled).
//
//go:embed policy/restrict-sidecars.yaml
var AdmissionPolicy []byte

// ArgoCDHealth is the Argo CD health check of a SidecarSet, in Lua, as
// argocd-cm's resource.customizations.health.sidecarset.dev_SidecarSet
// takes it.
//
//go:embed argocd/health.lua
var ArgoCDHealth string
