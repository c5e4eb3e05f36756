package realnode

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image is a test image the node builds and imports before the kubelet
// starts: static busybox with its applets and a /version file. Pods must
// use imagePullPolicy Never or IfNotPresent: nothing is pulled.
type Image struct {
	// Ref is the reference pods name it by, e.g. "sidecarset.test/busybox:v1".
	Ref string
	// SameAs, when set, is another image's Ref whose content this image
	// has: a second tag of the same image, with the same digest, when the
	// rest of the two Images are equal.
	SameAs string
	// Version is the content of /version; empty leaves the file out, so
	// that an exec readiness probe reading it never passes.
	Version string
	// Cmd replaces the default command, which sleeps until SIGTERM (or,
	// with Exporter, runs the exporter).
	Cmd []string
	// Exporter adds the exporter of test/images/exporter as /bin/exporter,
	// listening on ExporterPort and reporting Version (without one it exits
	// at once with an error), and makes it the default command. Busybox
	// stays, for exec probes and debugging.
	Exporter bool
}

// busyboxPath is where Debian's busybox-static puts the static binary.
const busyboxPath = "/bin/busybox"

// pauseRef is the sandbox image: busybox sleeping until it is stopped.
const pauseRef = "sidecarset.test/pause:1"

// defaultCmd sleeps until SIGTERM and then exits at once, so that a
// container stops without waiting out its grace period.
var defaultCmd = []string{"/bin/sh", "-c", "trap 'exit 0' TERM; sleep 2147483647 & wait"}

// exporterCmd runs the exporter without a shell, so that it is the
// container's PID 1 and the kubelet's SIGTERM reaches it.
var exporterCmd = []string{"/bin/exporter", "-listen", fmt.Sprintf(":%d", ExporterPort)}

// ExporterPort is the port an image with Exporter set serves on.
const ExporterPort = 9104

// buildImages writes one OCI image-layout tarball holding every image, each
// named by the annotation `ctr images import` reads, by tag and by digest,
// and returns the imageID the kubelet reports for each (its repository
// digest) and its manifest digest (what a reference pins with @). busyboxBin is the
// static busybox copied into each image, exporterBin the exporter copied
// into those with Exporter set ("" when none has it).
func buildImages(busyboxBin, exporterBin string, images []Image, tarPath string) (ids, digests map[string]string, err error) {
	applets, err := busyboxApplets(busyboxBin)
	if err != nil {
		return nil, nil, err
	}
	busybox, err := os.ReadFile(busyboxBin)
	if err != nil {
		return nil, nil, fmt.Errorf("read static busybox: %w", err)
	}
	var exporter []byte
	if exporterBin != "" {
		if exporter, err = os.ReadFile(exporterBin); err != nil {
			return nil, nil, fmt.Errorf("read the exporter: %w", err)
		}
	}
	dir, err := os.MkdirTemp(filepath.Dir(tarPath), "layout-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, nil, fmt.Errorf("start image layout: %w", err)
	}
	platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	ids, digests = map[string]string{}, map[string]string{}
	for _, im := range images {
		if im.Exporter && exporter == nil {
			return nil, nil, fmt.Errorf("build image %s: it asks for the exporter, and none was built", im.Ref)
		}
		img, err := busyboxImage(busybox, applets, exporter, im)
		if err != nil {
			return nil, nil, fmt.Errorf("build image %s: %w", im.Ref, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, nil, fmt.Errorf("digest of image %s: %w", im.Ref, err)
		}
		digests[im.Ref] = digest.String()
		named, err := normalized(im.Ref)
		if err != nil {
			return nil, nil, err
		}
		repo := named
		if i := strings.Index(named, "@"); i >= 0 {
			repo = named[:i]
		} else if i := strings.LastIndex(named, ":"); i > strings.LastIndex(named, "/") {
			repo = named[:i]
		}
		// The kubelet reports the repository digest of an image that has
		// one, as after a pull from a registry (without one, it would
		// report the config digest).
		ids[im.Ref] = repo + "@" + digest.String()
		// Named twice, so that the node knows it by tag and by digest, as
		// after a pull from a registry.
		for _, n := range []string{named, repo + "@" + digest.String()} {
			err = p.AppendImage(img,
				layout.WithAnnotations(map[string]string{"io.containerd.image.name": n}),
				layout.WithPlatform(platform))
			if err != nil {
				return nil, nil, fmt.Errorf("write image %s: %w", im.Ref, err)
			}
		}
	}
	return ids, digests, tarDir(dir, tarPath)
}

// normalized is the name containerd keeps an image by, which the kubelet
// looks a pod's image up with: "exporter:v1" is
// "docker.io/library/exporter:v1".
func normalized(ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	registry := r.Context().RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	sep := ":"
	if _, digest := r.(name.Digest); digest {
		sep = "@"
	}
	return registry + "/" + r.Context().RepositoryStr() + sep + r.Identifier(), nil
}

// busyboxApplets lists the applets the static busybox provides.
func busyboxApplets(busyboxBin string) ([]string, error) {
	out, err := exec.Command(busyboxBin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox applets: %w", err)
	}
	return strings.Fields(string(out)), nil
}

// busyboxImage is one image: busybox, its applets and /version, and with
// im.Exporter the exporter as /bin/exporter and the default command.
func busyboxImage(busybox []byte, applets []string, exporter []byte, im Image) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin", "dev", "etc", "proc", "sys", "tmp"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	type file struct {
		name string
		mode int64
		data []byte
	}
	// /reference makes each image's content its own: the kubelet reports
	// one repository digest for images of equal content, the first of
	// their names.
	content := im.Ref
	if im.SameAs != "" {
		content = im.SameAs
	}
	files := []file{{"bin/busybox", 0o755, busybox}, {"reference", 0o644, []byte(content + "\n")}}
	if im.Version != "" {
		files = append(files, file{"version", 0o644, []byte(im.Version + "\n")})
	}
	cmd := defaultCmd
	if im.Exporter {
		files = append(files, file{"bin/exporter", 0o755, exporter})
		cmd = exporterCmd
	}
	if im.Cmd != nil {
		cmd = im.Cmd
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	for _, a := range applets {
		if a == "busybox" {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Env = []string{"PATH=/bin"}
	cf.Config.Cmd = cmd
	if im.Exporter {
		cf.Config.ExposedPorts = map[string]struct{}{fmt.Sprintf("%d/tcp", ExporterPort): {}}
	}
	return mutate.ConfigFile(img, cf)
}

// tarDir writes the files under dir into a tarball at path, relative to dir.
func tarDir(dir, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write image tarball %s: %w", path, err)
	}
	return nil
}
