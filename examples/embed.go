// Package examples embeds the example manifests so that tests apply exactly
// what users copy.
package examples

import _ "embed"

// RBAC holds the example ClusterRoles and bindings for who may create
// SidecarSets and who may only read them.
//
//go:embed rbac/sidecarset-authors.yaml
var RBAC []byte

// ShareVolumes holds a SidecarSet whose sidecar shares the app
// containers' volume mounts and copies an environment variable from them.
//
//go:embed share-volumes/sidecarset.yaml
var ShareVolumes []byte
