// Package examples embeds the example manifests so that tests apply exactly
// what users copy.
package examples

import "embed"

// RBAC holds the example ClusterRoles and bindings for who may create
// SidecarSets and who may only read them.
//
//go:embed rbac/sidecarset-authors.yaml
var RBAC []byte

// SidecarSets holds the example SidecarSets, one per file under
// sidecarsets/, each showing a feature.
//
//go:embed sidecarsets/*.yaml
var SidecarSets embed.FS
