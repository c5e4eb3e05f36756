package realnode

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestBuildImages reads back the image layout that is imported into
// containerd: each image named by tag and by digest, as the annotation ctr
// reads says, for this platform, with the busybox applets as symlinks, the
// /version file and the repository digest as the imageID; an image with
// Exporter set also holds the exporter, built for real, and runs it.
func TestBuildImages(t *testing.T) {
	dir := t.TempDir()
	// A stand-in for the static busybox: it lists two applets.
	busyboxScript := "#!/bin/sh\necho busybox\necho sh\necho sleep\n"
	busybox := filepath.Join(dir, "busybox")
	if err := os.WriteFile(busybox, []byte(busyboxScript), 0o755); err != nil {
		t.Fatal(err)
	}
	exporter := filepath.Join(dir, "exporter")
	if err := buildExporter(context.Background(), exporter); err != nil {
		t.Fatal(err)
	}
	exporterData, err := os.ReadFile(exporter)
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(dir, "images.tar")
	images := []Image{
		{Ref: "sidecarset.test/busybox:v1", Version: "v1"},
		{Ref: "sidecarset.test/exporter:e1", Version: "e1", Exporter: true},
		{Ref: "sidecarset.test/busybox:v2", Version: "v2"},
	}
	ids, digests, err := buildImages(busybox, exporter, images, tarPath)
	if err != nil {
		t.Fatal(err)
	}
	layoutDir := filepath.Join(dir, "layout")
	untar(t, tarPath, layoutDir)
	index, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	// Each image is named by its tag, then by its digest.
	if len(manifest.Manifests) != 2*len(images) {
		t.Fatalf("index lists %d images, want %d", len(manifest.Manifests), 2*len(images))
	}
	for i, desc := range manifest.Manifests {
		want := images[i/2]
		repo, _, _ := strings.Cut(want.Ref, ":")
		wantName := want.Ref
		if i%2 == 1 {
			wantName = repo + "@" + desc.Digest.String()
		}
		if got := desc.Annotations["io.containerd.image.name"]; got != wantName {
			t.Errorf("image %d is named %q, want %q", i, got, wantName)
		}
		if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != runtime.GOARCH {
			t.Errorf("image %s has platform %v, want linux/%s", want.Ref, desc.Platform, runtime.GOARCH)
		}
		img, err := index.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if id := repo + "@" + desc.Digest.String(); i%2 == 0 && ids[want.Ref] != id {
			t.Errorf("imageID of %s is %s, want its repository digest %s", want.Ref, ids[want.Ref], id)
		}
		if digests[want.Ref] != desc.Digest.String() {
			t.Errorf("digest of %s is %s, want its manifest digest %s", want.Ref, digests[want.Ref], desc.Digest)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		wantCmd := []string{"/bin/sh", "-c", "trap 'exit 0' TERM; sleep 2147483647 & wait"}
		var wantPorts map[string]struct{}
		if want.Exporter {
			wantCmd = []string{"/bin/exporter", "-listen", ":9104"}
			wantPorts = map[string]struct{}{"9104/tcp": {}}
		}
		if diff := cmp.Diff(wantCmd, cf.Config.Cmd); diff != "" {
			t.Errorf("command of %s (-want +got):\n%s", want.Ref, diff)
		}
		if diff := cmp.Diff(wantPorts, cf.Config.ExposedPorts); diff != "" {
			t.Errorf("exposed ports of %s (-want +got):\n%s", want.Ref, diff)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("image %s has layers %v (%v), want one", want.Ref, layers, err)
		}
		got := layerFiles(t, layers[0])
		// The binaries are named, not shown, in a diff.
		for name, data := range map[string]string{"bin/busybox": busyboxScript, "bin/exporter": string(exporterData)} {
			if f, ok := got[name]; ok && f.content == data {
				f.content = "(" + name + ")"
				got[name] = f
			}
		}
		wantFiles := map[string]layerEntry{
			"bin/busybox": {0o755, "(bin/busybox)"},
			"bin/sh":      {0o777, "-> busybox"},
			"bin/sleep":   {0o777, "-> busybox"},
			"version":     {0o644, want.Version + "\n"},
			"reference":   {0o644, want.Ref + "\n"},
		}
		if want.Exporter {
			wantFiles["bin/exporter"] = layerEntry{0o755, "(bin/exporter)"}
		}
		if diff := cmp.Diff(wantFiles, got, cmp.AllowUnexported(layerEntry{})); diff != "" {
			t.Errorf("files of %s (-want +got):\n%s", want.Ref, diff)
		}
	}
}

// TestBuildImagesWithoutExporter: an image that asks for the exporter
// fails to build when none was built.
func TestBuildImagesWithoutExporter(t *testing.T) {
	dir := t.TempDir()
	busybox := filepath.Join(dir, "busybox")
	if err := os.WriteFile(busybox, []byte("#!/bin/sh\necho busybox\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := buildImages(busybox, "", []Image{{Ref: "sidecarset.test/exporter:e1", Version: "e1", Exporter: true}}, filepath.Join(dir, "images.tar"))
	want := "build image sidecarset.test/exporter:e1: it asks for the exporter, and none was built"
	if err == nil || err.Error() != want {
		t.Errorf("buildImages = %v, want %q", err, want)
	}
}

// TestBuildExporterWithoutGo: without the go command the error says so.
func TestBuildExporterWithoutGo(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := buildExporter(context.Background(), filepath.Join(t.TempDir(), "exporter"))
	if err == nil || !strings.Contains(err.Error(), "the go command is needed") {
		t.Errorf("buildExporter without go = %v, want an error saying go is needed", err)
	}
}

// TestCheckStatic tells the static exporter from a dynamically linked
// program and from a file that is no program.
func TestCheckStatic(t *testing.T) {
	exporter := filepath.Join(t.TempDir(), "exporter")
	if err := buildExporter(context.Background(), exporter); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bin, wantErr string
	}{
		{exporter, ""},
		{"/bin/ls", "is linked dynamically"},
		{script, "is not an ELF executable"},
	} {
		err := checkStatic(tc.bin)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("checkStatic(%s) = %v, want an error containing %q", tc.bin, err, tc.wantErr)
		}
	}
}

// layerEntry is a file in a layer: its mode and content, or "-> target"
// for a symlink.
type layerEntry struct {
	mode    int64
	content string
}

func layerFiles(t *testing.T, layer v1.Layer) map[string]layerEntry {
	t.Helper()
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]layerEntry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			got[h.Name] = layerEntry{h.Mode, "-> " + h.Linkname}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			got[h.Name] = layerEntry{h.Mode, string(data)}
		}
	}
}

func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			err = os.MkdirAll(p, 0o755)
		} else {
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`/tmp/ssnode-1/kubelet/pods`, `/tmp/ssnode-1/kubelet/pods`},
		{`/tmp/a\040b`, `/tmp/a b`},
		{`/tmp/tab\011x\134y`, "/tmp/tab\tx\\y"},
		{`/tmp/trailing\04`, `/tmp/trailing\04`},
	} {
		if got := unescapeMount(tc.in); got != tc.want {
			t.Errorf("unescapeMount(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestPrefixWriter checks that lines written in pieces come out whole, each
// with the prefix.
func TestPrefixWriter(t *testing.T) {
	var out strings.Builder
	w := &prefixWriter{prefix: "[kubelet] ", w: &out}
	for _, piece := range []string{"one\ntw", "o\n", "", "three\nfour"} {
		if n, err := w.Write([]byte(piece)); err != nil || n != len(piece) {
			t.Fatalf("Write(%q) = %d, %v", piece, n, err)
		}
	}
	want := "[kubelet] one\n[kubelet] two\n[kubelet] three\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestNormalized(t *testing.T) {
	for _, tc := range []struct{ ref, want string }{
		{"exporter:v1", "docker.io/library/exporter:v1"},
		{"exporter", "docker.io/library/exporter:latest"},
		{"example.com/team/exporter:v2", "example.com/team/exporter:v2"},
		{"sidecarset.test/busybox:v1", "sidecarset.test/busybox:v1"},
		{"localhost:5000/exporter:v1", "localhost:5000/exporter:v1"},
		{"team/exporter:v1", "docker.io/team/exporter:v1"},
	} {
		got, err := normalized(tc.ref)
		if err != nil || got != tc.want {
			t.Errorf("normalized(%q) = %q, %v; want %q", tc.ref, got, err, tc.want)
		}
	}
}
