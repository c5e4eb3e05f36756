// Package examples embeds the example manifests so that tests apply exactly
// what users copy.
package examples

import _ "embed"

// RBAC holds the example ClusterRoles and bindings for who may create
// SidecarSets and who may only read them.
//
//go:embed rbac/sidecarset-authors.yaml
var RBAC []byte
