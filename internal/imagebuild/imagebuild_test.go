package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"sigs.k8s.io/yaml"
)

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
	// created is a fixed source date: 2026-01-02T03:04:05Z.
	created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	meta    = Metadata{
		Title:       "hello",
		Description: "Says hello.",
		Source:      "https://example.com/hello",
		Version:     "v1.2.3",
		Revision:    "0123456789abcdef0123456789abcdef01234567",
		Licenses:    "Apache-2.0",
	}
	wantLabels = map[string]string{
		"org.opencontainers.image.title":       "hello",
		"org.opencontainers.image.description": "Says hello.",
		"org.opencontainers.image.source":      "https://example.com/hello",
		"org.opencontainers.image.version":     "v1.2.3",
		"org.opencontainers.image.revision":    "0123456789abcdef0123456789abcdef01234567",
		"org.opencontainers.image.created":     "2026-01-02T03:04:05Z",
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
)

// binDir holds the test binaries, for the whole run.
var binDir string

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "imagebuild-hello-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// binaries builds testdata/hello, static, once for each test platform.
var binaries = sync.OnceValues(func() (map[string]string, error) {
	paths := map[string]string{}
	for _, p := range []v1.Platform{amd64, arm64} {
		bin := filepath.Join(binDir, p.Architecture, "hello")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./testdata/hello")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, errors.New(string(out))
		}
		paths[p.String()] = bin
	}
	return paths, nil
})

// spec is a two-platform spec of the hello binaries with made-up CA
// certificates, so that nothing depends on this machine's.
func spec(t *testing.T) Spec {
	t.Helper()
	bins, err := binaries()
	if err != nil {
		t.Fatalf("build the test binaries: %v", err)
	}
	certs := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Spec{
		Name: "hello",
		Binaries: []Binary{
			{Platform: amd64, Path: bins[amd64.String()]},
			{Platform: arm64, Path: bins[arm64.String()]},
		},
		CACerts:  certs,
		Created:  created,
		Metadata: meta,
	}
}

func build(t *testing.T, s Spec) v1.ImageIndex {
	t.Helper()
	idx, err := Build(s)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return idx
}

func digest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// entry is what a test sees of a tar entry.
type entry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	ModTime  time.Time
	Data     string
}

func entries(t *testing.T, r io.Reader) []entry {
	t.Helper()
	var got []entry
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, entry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime.UTC(), string(data)})
	}
}

func layerEntries(t *testing.T, l v1.Layer) []entry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return entries(t, rc)
}

func TestBuild(t *testing.T) {
	s := spec(t)
	idx := build(t, s)

	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type = %s, want %s", im.MediaType, types.OCIImageIndex)
	}
	if diff := cmp.Diff(wantLabels, im.Annotations); diff != "" {
		t.Errorf("index annotations (-want +got):\n%s", diff)
	}
	if len(im.Manifests) != 2 {
		t.Fatalf("index lists %d manifests, want one per platform, 2", len(im.Manifests))
	}
	certs, err := os.ReadFile(s.CACerts)
	if err != nil {
		t.Fatal(err)
	}
	wantBase := []entry{
		{"etc/", tar.TypeDir, 0o755, 0, 0, created, ""},
		{"etc/group", tar.TypeReg, 0o644, 0, 0, created, "root:x:0:\nnonroot:x:65532:\n"},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0, created,
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
		{"etc/ssl/", tar.TypeDir, 0o755, 0, 0, created, ""},
		{"etc/ssl/certs/", tar.TypeDir, 0o755, 0, 0, created, ""},
		{"etc/ssl/certs/ca-certificates.crt", tar.TypeReg, 0o644, 0, 0, created, string(certs)},
		{"home/", tar.TypeDir, 0o755, 0, 0, created, ""},
		{"home/nonroot/", tar.TypeDir, 0o700, 65532, 65532, created, ""},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0, created, ""},
	}
	var baseDigests []v1.Hash
	for i, desc := range im.Manifests {
		b := s.Binaries[i]
		t.Run(b.Platform.String(), func(t *testing.T) {
			if desc.Platform == nil || desc.Platform.String() != b.Platform.String() {
				t.Errorf("manifest %d platform = %v, want %s", i, desc.Platform, b.Platform)
			}
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			if got := digest(t, img); got != desc.Digest {
				t.Errorf("image digest %s, the index says %s", got, desc.Digest)
			}
			if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 || desc.MediaType != types.OCIManifestSchema1 {
				t.Errorf("manifest media type %s (index: %s), want %s", mt, desc.MediaType, types.OCIManifestSchema1)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != b.Platform.OS || cf.Architecture != b.Platform.Architecture {
				t.Errorf("config platform %s/%s, want %s", cf.OS, cf.Architecture, b.Platform)
			}
			if !cf.Created.Equal(created) {
				t.Errorf("config created %s, want %s", cf.Created.Time, created)
			}
			wantConfig := v1.Config{User: "65532:65532", Entrypoint: []string{"/hello"}, WorkingDir: "/", Labels: wantLabels}
			if diff := cmp.Diff(wantConfig, cf.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if len(cf.History) != 2 {
				t.Errorf("history has %d entries, want one per layer, 2", len(cf.History))
			}
			for _, h := range cf.History {
				if !h.Created.Equal(created) {
					t.Errorf("history %q created %s, want %s", h.CreatedBy, h.Created.Time, created)
				}
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != 2 {
				t.Fatalf("%d layers, want 2", len(layers))
			}
			for _, l := range layers {
				if mt, _ := l.MediaType(); mt != types.OCILayer {
					t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
				}
			}
			if diff := cmp.Diff(wantBase, layerEntries(t, layers[0])); diff != "" {
				t.Errorf("first layer (-want +got):\n%s", diff)
			}
			bin, err := os.ReadFile(b.Path)
			if err != nil {
				t.Fatal(err)
			}
			app := layerEntries(t, layers[1])
			for i := range app {
				if app[i].Data == string(bin) {
					app[i].Data = "the binary"
				}
			}
			wantApp := []entry{{"hello", tar.TypeReg, 0o755, 0, 0, created, "the binary"}}
			if diff := cmp.Diff(wantApp, app); diff != "" {
				t.Errorf("second layer (-want +got):\n%s", diff)
			}
			baseDigests = append(baseDigests, digest(t, layers[0]))
		})
	}
	if len(baseDigests) == 2 && baseDigests[0] != baseDigests[1] {
		t.Errorf("the platform-independent layer differs between platforms: %v", baseDigests)
	}
}

func TestBuildRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*Spec)
		want   string
	}{
		{"no binaries", func(s *Spec) { s.Binaries = nil }, "binaries: none given"},
		{"a platform twice", func(s *Spec) { s.Binaries[1].Platform = amd64 }, "platform linux/amd64: given twice"},
		{"a name with a folder", func(s *Spec) { s.Name = "bin/hello" }, `binary name "bin/hello"`},
		{"no name", func(s *Spec) { s.Name = "" }, `binary name ""`},
		{"missing certificates", func(s *Spec) { s.CACerts = "/nonexistent/ca.crt" }, "read CA certificates"},
		{"missing binary", func(s *Spec) { s.Binaries[0].Path = "/nonexistent/hello" }, "image for linux/amd64: read binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec(t)
			tc.modify(&s)
			_, err := Build(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReproducible(t *testing.T) {
	s := spec(t)
	ref := name.MustParseReference("example.com/hello:v1.2.3").(name.Tag)
	dir := t.TempDir()
	var archives [2][]byte
	var digests [2]v1.Hash
	for i := range 2 {
		idx := build(t, s)
		digests[i] = digest(t, idx)
		p := filepath.Join(dir, "hello.tar")
		if err := WriteArchive(p, idx, ref, created); err != nil {
			t.Fatal(err)
		}
		var err error
		if archives[i], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of the same inputs: digests %s and %s", digests[0], digests[1])
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Errorf("two archives of the same inputs differ")
	}
	// One platform is enough to see the time reach the digest.
	s.Binaries = s.Binaries[:1]
	first := digest(t, build(t, s))
	s.Created = created.Add(time.Second)
	if later := digest(t, build(t, s)); later == first {
		t.Errorf("a later source date gives the same digest %s: the time does not reach the image", later)
	}
}

func TestWriteArchive(t *testing.T) {
	idx := build(t, spec(t))
	ref := name.MustParseReference("example.com/team/hello:v1.2.3").(name.Tag)
	p := filepath.Join(t.TempDir(), "out", "hello.tar")
	if err := WriteArchive(p, idx, ref, created); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := entries(t, f)

	// Both forms, in a fixed order, every mtime the source date.
	var names []string
	for _, e := range got {
		names = append(names, e.Name)
		if !e.ModTime.Equal(created) {
			t.Errorf("%s: mtime %s, want %s", e.Name, e.ModTime, created)
		}
	}
	if want := []string{"oci-layout", "index.json", "manifest.json", "blobs/", "blobs/sha256/"}; !cmp.Equal(want, names[:min(len(names), 5)]) {
		t.Errorf("archive starts with %v, want %v", names, want)
	}
	blobs := names[min(len(names), 5):]
	// The index, two manifests, two configs, the shared layer and two binary layers.
	if len(blobs) != 8 {
		t.Errorf("archive holds %d blobs, want 8: %v", len(blobs), blobs)
	}
	for _, b := range blobs {
		if !strings.HasPrefix(b, "blobs/sha256/") {
			t.Errorf("unexpected entry %s", b)
		}
	}

	// The OCI layout, read back: index.json names the index.
	dir := t.TempDir()
	for _, e := range got {
		if e.Type == tar.TypeDir {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(e.Name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name), []byte(e.Data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("read the OCI layout: %v", err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want the one index", len(tm.Manifests))
	}
	d := tm.Manifests[0]
	if d.Digest != digest(t, idx) || d.MediaType != types.OCIImageIndex {
		t.Errorf("index.json points at %s %s, want the index %s", d.MediaType, d.Digest, digest(t, idx))
	}
	wantAnn := map[string]string{
		"io.containerd.image.name":          "example.com/team/hello:v1.2.3",
		"org.opencontainers.image.ref.name": "v1.2.3",
	}
	if diff := cmp.Diff(wantAnn, d.Annotations); diff != "" {
		t.Errorf("index.json annotations (-want +got):\n%s", diff)
	}
	back, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(back); err != nil {
		t.Errorf("the index read back from the layout: %v", err)
	}

	// The docker-save form, read back as docker load would: the first
	// platform's config and layers.
	tag := name.MustParseReference("example.com/team/hello:v1.2.3").(name.Tag)
	docker, err := tarball.ImageFromPath(p, &tag)
	if err != nil {
		t.Fatalf("read manifest.json: %v", err)
	}
	first, err := idx.Image(mustManifests(t, idx)[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := configName(t, docker), configName(t, first); got != want {
		t.Errorf("manifest.json config %s, want the first image's %s", got, want)
	}
	if got, want := diffIDs(t, docker), diffIDs(t, first); !cmp.Equal(got, want) {
		t.Errorf("manifest.json layers %v, want the first image's %v", got, want)
	}
	if err := validate.Image(docker); err != nil {
		t.Errorf("the docker-save form does not hold together: %v", err)
	}
}

func mustManifests(t *testing.T, idx v1.ImageIndex) []v1.Descriptor {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return im.Manifests
}

func configName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	h, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func diffIDs(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf.RootFS.DiffIDs
}

func TestPush(t *testing.T) {
	idx := build(t, spec(t))
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Reference(u.Host+"/sidecarset/hello", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := Push(context.Background(), idx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if want := digest(t, idx); pushed != want {
		t.Errorf("the registry serves %s at %s, want the built %s", ref, pushed, want)
	}
	pulled, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	if got, want := digest(t, pulled), digest(t, idx); got != want {
		t.Errorf("pulled index %s, want %s", got, want)
	}
	if err := validate.Index(pulled); err != nil {
		t.Errorf("the pulled index does not hold together: %v", err)
	}
	img, err := remote.Image(ref, remote.WithPlatform(arm64))
	if err != nil {
		t.Fatalf("pull %s for %s: %v", ref, arm64, err)
	}
	if got, want := digest(t, img), mustManifests(t, idx)[1].Digest; got != want {
		t.Errorf("pulled %s image %s, want %s", arm64, got, want)
	}
}

func TestContainerdName(t *testing.T) {
	for _, tc := range []struct{ ref, want string }{
		{"ghcr.io/sidecarset/sidecarset-manager:v0.1.0", "ghcr.io/sidecarset/sidecarset-manager:v0.1.0"},
		{"sidecarset-manager:dev", "docker.io/library/sidecarset-manager:dev"},
		{"someone/sidecarset-manager:dev", "docker.io/someone/sidecarset-manager:dev"},
		{"localhost:5000/sidecarset-manager:dev", "localhost:5000/sidecarset-manager:dev"},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			ref, err := name.NewTag(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if got := ContainerdName(ref); got != tc.want {
				t.Errorf("ContainerdName(%s) = %s, want %s", tc.ref, got, tc.want)
			}
		})
	}
}

func TestReference(t *testing.T) {
	for _, tc := range []struct{ repo, tag, want, err string }{
		{"ghcr.io/sidecarset/sidecarset-manager", "v0.1.0", "ghcr.io/sidecarset/sidecarset-manager:v0.1.0", ""},
		{"localhost:5000/manager", "dev", "localhost:5000/manager:dev", ""},
		{"ghcr.io/sidecarset/sidecarset-manager", "", "", "image reference ghcr.io/sidecarset/sidecarset-manager:"},
		{"ghcr.io/Upper/case", "v1", "", "image reference ghcr.io/Upper/case:v1"},
	} {
		t.Run(tc.repo+":"+tc.tag, func(t *testing.T) {
			ref, err := Reference(tc.repo, tc.tag)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ref.String() != tc.want {
				t.Errorf("reference %s, want %s", ref, tc.want)
			}
		})
	}
}

// TestChartDefault checks that what `make image` tags by default is what
// the chart installs by default: the chart's image.repository with its empty
// image.tag standing for appVersion.
func TestChartDefault(t *testing.T) {
	chartDir := filepath.Join("..", "..", "charts", "sidecarset")
	ref, err := DefaultReference(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	read := func(file string, v any) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(chartDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	read("Chart.yaml", &chart)
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	read("values.yaml", &values)
	tag := values.Image.Tag
	if tag == "" {
		tag = chart.AppVersion
	}
	if got, want := ref.String(), values.Image.Repository+":"+tag; got != want {
		t.Errorf("make image tags %s by default, the chart installs %s", got, want)
	}
}
