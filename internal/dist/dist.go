// Package dist describes the release archives of kubectl-sidecarset and the
// krew manifest that installs them: how each archive is named and laid out,
// and the manifest that points krew at them. hack/dist builds the archives
// (`make dist`); plugins/sidecarset.yaml is the manifest with placeholder
// sums.
package dist

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Plugin is the plugin's name in krew: `kubectl krew install sidecarset`
// installs kubectl-sidecarset, run as `kubectl sidecarset`.
const Plugin = "sidecarset"

// Binary is the command's name on every platform but Windows.
const Binary = "kubectl-sidecarset"

// ReleaseURL is where a release's archives are downloaded from:
// ReleaseURL/<version>/<archive>, a GitHub release's assets.
const ReleaseURL = "https://github.com/sidecarset/sidecarset/releases/download"

// PlaceholderSum stands for an archive's sha256 in a manifest written
// before the archive exists.
var PlaceholderSum = strings.Repeat("0", sha256.Size*2)

// Platform is one os/arch an archive is built for.
type Platform struct {
	OS, Arch string
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Platforms are the platforms a release is built for, in the manifest's
// order.
var Platforms = []Platform{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// ParsePlatform reads "os/arch" and checks that a release is built for it.
func ParsePlatform(s string) (Platform, error) {
	osName, arch, ok := strings.Cut(s, "/")
	p := Platform{osName, arch}
	if !ok {
		return p, fmt.Errorf("platform %q: want os/arch, e.g. linux/amd64", s)
	}
	for _, q := range Platforms {
		if q == p {
			return p, nil
		}
	}
	return p, fmt.Errorf("platform %q: a release is built for %v only", s, Platforms)
}

// BinaryName is the command's file name on p.
func (p Platform) BinaryName() string {
	if p.OS == "windows" {
		return Binary + ".exe"
	}
	return Binary
}

// ArchiveName names p's archive of version, as krew users see it in the
// manifest and GoReleaser-style releases name theirs:
// kubectl-sidecarset_v0.1.0_linux_amd64.tar.gz. Every platform, Windows
// included, gets a tar.gz: krew unpacks tar.gz everywhere.
func ArchiveName(version string, p Platform) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", Binary, version, p.OS, p.Arch)
}

// License is the name of the license file in every archive, beside the
// binary: krew-index asks each plugin to ship its license.
const License = "LICENSE"

// WriteArchive writes p's archive holding binary, the command built for
// p, executable, and license as License, at the archive's top level, owned
// by root, dated mtime: the same inputs give the same bytes, so the same
// sha256.
func WriteArchive(w io.Writer, p Platform, binary, license []byte, mtime time.Time) error {
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	// gzip's header carries no name or time unless set: nothing varies.
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{p.BinaryName(), 0o755, binary}, {License, 0o644, license}} {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.name,
			Mode:     f.mode,
			Size:     int64(len(f.data)),
			ModTime:  mtime.UTC().Truncate(time.Second),
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("archive for %s: %w", p, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("archive for %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive for %s: %w", p, err)
	}
	return gz.Close()
}

// Sum returns the sha256 of data as krew's manifests write it: lower-case
// hex.
func Sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// The krew manifest, apiVersion krew.googlecontainertools.github.com/v1alpha2,
// kind Plugin (krew's pkg/index types): the fields this plugin uses.
type (
	manifest struct {
		APIVersion string       `json:"apiVersion"`
		Kind       string       `json:"kind"`
		Metadata   metadata     `json:"metadata"`
		Spec       manifestSpec `json:"spec"`
	}
	metadata struct {
		Name string `json:"name"`
	}
	manifestSpec struct {
		Version          string     `json:"version"`
		Homepage         string     `json:"homepage"`
		ShortDescription string     `json:"shortDescription"`
		Description      string     `json:"description"`
		Platforms        []platform `json:"platforms"`
	}
	platform struct {
		Selector selector `json:"selector"`
		URI      string   `json:"uri"`
		Sha256   string   `json:"sha256"`
		Files    []file   `json:"files"`
		Bin      string   `json:"bin"`
	}
	selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	file struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
)

const description = `Inspects and steers SidecarSets (sidecarset.dev/v1alpha1): the rollout
status of each set and its pods, promoting, pausing, resuming, undoing and
stepping a rollout, checking that the webhooks answer, and rolling the owners
of pods created without their sidecars. Offline, it injects SidecarSets into
manifests and converts OpenKruise SidecarSets.
`

// Manifest returns the krew manifest of version, whose archives have the
// sums given per platform (PlaceholderSum where an archive is not built
// yet). Every platform of Platforms must have a sum.
func Manifest(version string, sums map[Platform]string) ([]byte, error) {
	m := manifest{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   metadata{Name: Plugin},
		Spec: manifestSpec{
			Version:          version,
			Homepage:         "https://github.com/sidecarset/sidecarset",
			ShortDescription: "Inspect and steer SidecarSets and their rollouts",
			Description:      description,
		},
	}
	for _, p := range Platforms {
		sum, ok := sums[p]
		if !ok {
			return nil, fmt.Errorf("krew manifest of %s: no sha256 for %s", version, p)
		}
		m.Spec.Platforms = append(m.Spec.Platforms, platform{
			Selector: selector{MatchLabels: map[string]string{"os": p.OS, "arch": p.Arch}},
			URI:      fmt.Sprintf("%s/%s/%s", ReleaseURL, version, ArchiveName(version, p)),
			Sha256:   sum,
			Files:    []file{{From: p.BinaryName(), To: "."}, {From: License, To: "."}},
			Bin:      p.BinaryName(),
		})
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("krew manifest of %s: %w", version, err)
	}
	return append([]byte(manifestHeader), out...), nil
}

// manifestHeader opens every manifest Manifest writes.
const manifestHeader = `# The krew manifest of kubectl-sidecarset (kubectl krew install sidecarset).
# Written by hack/dist: ` + "`make dist VERSION=vX.Y.Z`" + ` builds the archives into
# bin/dist/ and writes this manifest there with their sha256 sums, the file a
# release submits to krew-index. The copy in plugins/ holds placeholder sums.
`
