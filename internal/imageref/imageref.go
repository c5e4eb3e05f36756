// Package imageref reads container image references as the kubelet and
// containerd do, with github.com/distribution/reference's grammar and Docker
// Hub's defaults, and compares them by what they mean.
package imageref

import (
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
)

// Ref is an image reference normalised as the runtime reads it.
type Ref struct {
	// Repo is the repository with its registry: docker.io/library/nginx.
	Repo string
	// Tag is the tag: "latest" when neither tag nor digest is given, ""
	// when a digest alone is.
	Tag string
	// ExplicitTag: the reference names its tag.
	ExplicitTag bool
	// Digest is "algorithm:hex", or "".
	Digest string
}

// Parse reads s. It fails where the runtime would: an uppercase repository,
// a malformed digest, an empty reference.
func Parse(s string) (Ref, error) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return Ref{}, err
	}
	r := Ref{Repo: named.Name()}
	if t, ok := named.(reference.Tagged); ok {
		r.Tag, r.ExplicitTag = t.Tag(), true
	}
	if d, ok := named.(reference.Digested); ok {
		r.Digest = d.Digest().String()
	}
	if r.Tag == "" && r.Digest == "" {
		r.Tag = "latest"
	}
	return r, nil
}

// Same reports whether inSpec, a sidecar's image in the pod spec, means
// recorded, the image last written: then it has not drifted. Policies
// rewrite images without changing what runs (a digest pin, a mirror by
// digest), and driftPolicy Revert would fight them for ever. A digest
// decides the content whatever the name, and a tag alone says nothing
// about it.
//
// Worked cases:
//
//	recorded                  inSpec                       same
//	x:v1                      x:v1                         true   equal
//	nginx:1                   docker.io/library/nginx:1    true   Docker Hub defaults
//	nginx                     index.docker.io/nginx:latest true   default tag and registry
//	x:v1                      x:v1@sha256:aaa…             true   digest appended (a pinning policy)
//	r.io/x:v1@sha256:aaa…     mirror.io/x@sha256:aaa…      true   same digest (a mirror)
//	x:v1                      x:v2                         false  another tag
//	x@sha256:aaa…             x@sha256:bbb…                false  another digest
//	x:v1                      mirror.io/x:v1               false  a mirror by tag: its content may differ
//	x:v1                      x@sha256:aaa…                false  tag replaced: which tag it was is unknown
//	x:v1@sha256:aaa…          x:v1                         false  digest taken away: the tag may have moved
//	x:v1                      x:v1@sha256:aaa…@sha256:aaa… false  not a reference
func Same(recorded, inSpec string) bool {
	if recorded == inSpec {
		return true
	}
	r, err := Parse(recorded)
	if err != nil {
		return false
	}
	s, err := Parse(inSpec)
	if err != nil {
		return false
	}
	switch {
	case r.Digest != "" && s.Digest != "":
		return r.Digest == s.Digest
	case r.Digest != "":
		return false
	case s.Digest != "" && !s.ExplicitTag:
		return false
	}
	return r.Repo == s.Repo && r.Tag == s.Tag
}

// Digest returns the digest ref is pinned to ("repo:tag@sha256:<hex>" or
// "repo@sha256:<hex>"), or "".
func Digest(ref string) string {
	r, err := Parse(ref)
	if err != nil {
		return ""
	}
	return r.Digest
}

// IDDigest returns the digest in a container status imageID, or "": the
// runtimes write "repo@sha256:<hex>", "sha256:<hex>", and, through
// cri-dockerd, "docker-pullable://repo@sha256:<hex>".
func IDDigest(id string) string {
	if _, rest, ok := strings.Cut(id, "://"); ok {
		id = rest
	}
	if i := strings.LastIndex(id, "@"); i >= 0 {
		id = id[i+1:]
	}
	if _, err := digest.Parse(id); err != nil {
		return ""
	}
	return id
}

// SameID reports whether two status imageIDs name the same content: their
// digests when both carry one, the strings otherwise.
func SameID(a, b string) bool {
	if da, db := IDDigest(a), IDDigest(b); da != "" && db != "" {
		return da == db
	}
	return a == b
}
