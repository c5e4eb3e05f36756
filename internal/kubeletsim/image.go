package kubeletsim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/internal/imageref"
)

// The simulated registry. An image reference resolves to a digest:
// sha256 of the normalized "repository:tag" unless the ConfigMap
// kube-system/simulated-registry re-points that tag (a "re-push").
const (
	RegistryNamespace = "kube-system"
	RegistryName      = "simulated-registry"
)

var digestRegexp = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// imageRef is a parsed, normalized image reference.
type imageRef struct {
	// repo is the normalized repository, e.g. docker.io/library/nginx.
	repo string
	// tag is empty only when the reference names a digest and no tag.
	tag string
	// digest is set when the reference pins one; it wins over the tag.
	digest string
}

// parseImage parses and normalizes s as the kubelet and containerd do
// (imageref.Parse): "nginx" is docker.io/library/nginx:latest, "nginx:1.25"
// is docker.io/library/nginx:1.25, "ghcr.io/a/b@sha256:..." keeps its
// digest. A reference that does not parse gives InvalidImageName, as on a
// real node.
func parseImage(s string) (imageRef, error) {
	r, err := imageref.Parse(s)
	if err != nil {
		return imageRef{}, fmt.Errorf("couldn't parse image name %q: invalid reference format", s)
	}
	return imageRef{repo: r.Repo, tag: r.Tag, digest: r.Digest}, nil
}

// tagged is the normalized "repository:tag", the key the registry resolves.
func (r imageRef) tagged() string { return r.repo + ":" + r.tag }

// String is the normalized reference, e.g. docker.io/library/nginx:1.25.
func (r imageRef) String() string {
	s := r.repo
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

// behaviour is what a container running an image does. Its name (the
// repository or the tag) decides it, so tests and demos pick a behaviour by
// naming an image: example/proxy-crashes:v3 and fluent-bit:crashes crash.
type behaviour int

const (
	runsForever  behaviour = iota
	pullFails              // name contains "pull-fails": every pull fails
	crashes                // "crashes": starts, then exits 1
	completes              // "completes": runs a while, then exits 0
	neverReady             // "never-ready": runs, never passes readiness
	turnsUnready           // "turns-unready": passes readiness, fails it for good after a while, runs on
)

// behaviourOf checks the markers in this order, in the repository and the
// tag; the first one found wins.
func behaviourOf(r imageRef) behaviour {
	name := r.repo + ":" + r.tag
	switch {
	case strings.Contains(name, "pull-fails"):
		return pullFails
	case strings.Contains(name, "crashes"):
		return crashes
	case strings.Contains(name, "completes"):
		return completes
	case strings.Contains(name, "never-ready"):
		return neverReady
	case strings.Contains(name, "turns-unready"):
		return turnsUnready
	}
	return runsForever
}

// registry resolves tags to digests; it is shared by every simulated node.
type registry struct {
	mu     sync.RWMutex
	pushed map[string]string // normalized repository:tag -> sha256:<hex>
}

// resolve returns the digest a pull of r gets now.
func (g *registry) resolve(r imageRef) string {
	if r.digest != "" {
		return r.digest
	}
	g.mu.RLock()
	d, ok := g.pushed[r.tagged()]
	g.mu.RUnlock()
	if ok {
		return d
	}
	sum := sha256.Sum256([]byte(r.tagged()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// load replaces the re-pushed tags with those in cm (nil: none). Lines that
// do not parse are skipped and reported; the rest still apply.
func (g *registry) load(cm *corev1.ConfigMap) error {
	pushed := map[string]string{}
	var errs []error
	if cm != nil {
		keys := make([]string, 0, len(cm.Data))
		for k := range cm.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, line := range strings.Split(cm.Data[k], "\n") {
				ref, digest, err := parseRegistryLine(line)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s/%s data[%q]: %w", cm.Namespace, cm.Name, k, err))
					continue
				}
				if ref != "" {
					pushed[ref] = digest
				}
			}
		}
	}
	g.mu.Lock()
	g.pushed = pushed
	g.mu.Unlock()
	return errors.Join(errs...)
}

// parseRegistryLine reads "repository:tag=sha256:<hex>" (or the two separated
// by spaces). ConfigMap keys cannot hold ':' or '/', so the mapping lives in
// the values: one or more lines per key, the key itself is free. Empty lines
// and lines starting with '#' give an empty ref.
func parseRegistryLine(line string) (ref, digest string, err error) {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return "", "", nil
	}
	f := strings.FieldsFunc(line, func(r rune) bool { return r == '=' || unicode.IsSpace(r) })
	if len(f) != 2 {
		return "", "", fmt.Errorf("line %q: want repository:tag=sha256:<hex>", line)
	}
	r, err := parseImage(f[0])
	if err != nil {
		return "", "", fmt.Errorf("line %q: %w", line, err)
	}
	if r.digest != "" {
		return "", "", fmt.Errorf("line %q: a digest reference cannot be re-pointed", line)
	}
	if !digestRegexp.MatchString(f[1]) {
		return "", "", fmt.Errorf("line %q: digest must be sha256: and 64 lower-case hex digits", line)
	}
	return r.tagged(), f[1], nil
}

// Digest is the digest a simulated pull of ref gets while the registry
// ConfigMap does not re-point its tag.
func Digest(ref string) (string, error) {
	r, err := parseImage(ref)
	if err != nil {
		return "", err
	}
	return (&registry{}).resolve(r), nil
}

// ImageID is the imageID a node reports for a container it pulled ref for
// while the registry ConfigMap does not re-point ref's tag.
func ImageID(ref string) (string, error) {
	r, err := parseImage(ref)
	if err != nil {
		return "", err
	}
	return r.repo + "@" + (&registry{}).resolve(r), nil
}

// RegistryConfigMap returns the ConfigMap that re-points each tag in pushed
// (a reference such as "app:v2" or "ghcr.io/x/app:v2") to its digest
// ("sha256:<hex>"). Create or update it to simulate a re-push.
func RegistryConfigMap(pushed map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{Data: map[string]string{}}
	cm.Namespace, cm.Name = RegistryNamespace, RegistryName
	for ref, digest := range pushed {
		cm.Data[configMapKey(ref)] = ref + "=" + digest
	}
	return cm
}

// configMapKey turns a reference into a valid ConfigMap key
// ([-._a-zA-Z0-9]+); the key only has to be unique, the value says it all.
func configMapKey(ref string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '.' || r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return r
		}
		return '_'
	}, ref) + "-" + fmt.Sprintf("%x", sha256.Sum256([]byte(ref)))[:8]
}

// nodeImages is one node's image store, as containerd keeps it: which digest
// each tag pointed at when this node pulled it, and for each digest the
// references it is known by, in the order the node learnt them.
type nodeImages struct {
	mu     sync.Mutex
	tags   map[string]string       // repository:tag -> digest
	images map[string]*storedImage // digest -> what the node knows of it
}

type storedImage struct {
	tags        []string // normalized repository:tag, first learnt first
	repoDigests []string // repository@digest, first learnt first
}

func newNodeImages() *nodeImages {
	return &nodeImages{tags: map[string]string{}, images: map[string]*storedImage{}}
}

// present returns the digest r names on this node, if the node has it.
func (n *nodeImages) present(r imageRef) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if r.digest != "" {
		_, ok := n.images[r.digest]
		return r.digest, ok
	}
	d, ok := n.tags[r.tagged()]
	return d, ok
}

// record stores that r was pulled (or imported) as digest. A tag that pointed
// elsewhere moves, as a re-pull after a re-push moves it in containerd.
func (n *nodeImages) record(r imageRef, digest string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	img := n.images[digest]
	if img == nil {
		img = &storedImage{}
		n.images[digest] = img
	}
	if r.digest == "" {
		t := r.tagged()
		if old, ok := n.tags[t]; ok && old != digest {
			n.images[old].tags = slices.DeleteFunc(n.images[old].tags, func(s string) bool { return s == t })
		}
		n.tags[t] = digest
		if !slices.Contains(img.tags, t) {
			img.tags = append(img.tags, t)
		}
	}
	if rd := r.repo + "@" + digest; !slices.Contains(img.repoDigests, rd) {
		img.repoDigests = append(img.repoDigests, rd)
	}
}

// describe returns what containerd reports for a container of r running
// digest: the image's first tag on this node (so a second tag for a known
// digest shows the first one) or, with none, the digest reference; and its
// first repo digest as imageID.
func (n *nodeImages) describe(r imageRef, digest string) (image, imageID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	image, imageID = r.repo+"@"+digest, r.repo+"@"+digest
	if img := n.images[digest]; img != nil {
		if len(img.tags) > 0 {
			image = img.tags[0]
		}
		if len(img.repoDigests) > 0 {
			imageID = img.repoDigests[0]
		}
	}
	return image, imageID
}
