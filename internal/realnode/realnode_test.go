package realnode

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestBuildImages reads back the image layout that is imported into
// containerd: one manifest per image, named by the annotation ctr reads,
// for this platform, with the busybox applets as symlinks, the /version file
// and the image config digest as the imageID.
func TestBuildImages(t *testing.T) {
	dir := t.TempDir()
	// A stand-in for the static busybox: it lists two applets.
	busybox := filepath.Join(dir, "busybox")
	if err := os.WriteFile(busybox, []byte("#!/bin/sh\necho busybox\necho sh\necho sleep\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(dir, "images.tar")
	images := []Image{{Ref: "sidecarset.test/busybox:v1", Version: "v1"}, {Ref: "sidecarset.test/busybox:v2", Version: "v2"}}
	ids, digests, err := buildImages(busybox, images, tarPath)
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
		wantName := want.Ref
		if i%2 == 1 {
			wantName = "sidecarset.test/busybox@" + desc.Digest.String()
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
		if id := "sidecarset.test/busybox@" + desc.Digest.String(); i%2 == 0 && ids[want.Ref] != id {
			t.Errorf("imageID of %s is %s, want its repository digest %s", want.Ref, ids[want.Ref], id)
		}
		if digests[want.Ref] != desc.Digest.String() {
			t.Errorf("digest of %s is %s, want its manifest digest %s", want.Ref, digests[want.Ref], desc.Digest)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(defaultCmd, cf.Config.Cmd); diff != "" {
			t.Errorf("command of %s (-want +got):\n%s", want.Ref, diff)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("image %s has layers %v (%v), want one", want.Ref, layers, err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			switch h.Typeflag {
			case tar.TypeSymlink:
				got[h.Name] = "-> " + h.Linkname
			case tar.TypeReg:
				data, _ := io.ReadAll(tr)
				if h.Name == "bin/busybox" {
					data = []byte("busybox")
				}
				got[h.Name] = string(data)
			}
		}
		rc.Close()
		wantFiles := map[string]string{"bin/busybox": "busybox", "bin/sh": "-> busybox", "bin/sleep": "-> busybox", "version": want.Version + "\n"}
		if diff := cmp.Diff(wantFiles, got); diff != "" {
			t.Errorf("files of %s (-want +got):\n%s", want.Ref, diff)
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
