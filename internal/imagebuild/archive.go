package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations of index.json that name the image, as `docker save`
// (25 and later) writes them: containerd's importer takes the full name
// from the first, OCI tools the tag from the second.
const (
	AnnotationContainerdName = "io.containerd.image.name"
	AnnotationRefName        = "org.opencontainers.image.ref.name"
)

// ContainerdName is the name containerd keeps ref by, and the kubelet looks
// a pod's image up with: the registry spelled out, Docker Hub as docker.io
// (ggcr spells it index.docker.io), e.g. "docker.io/library/manager:v1".
func ContainerdName(ref name.Tag) string {
	registry := ref.RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	return registry + "/" + ref.RepositoryStr() + ":" + ref.TagStr()
}

// WriteArchive writes idx, named ref, into one tarball at path, in the two
// forms `docker save` (25 and later) writes at once:
//   - an OCI image layout (oci-layout, index.json, blobs/sha256/...), whose
//     index.json names the index by both annotations above: what `ctr
//     images import` and `kind load image-archive` read;
//   - manifest.json in the older docker-save form, pointing into the same
//     blobs: what `docker load` without the containerd image store reads.
//     That form knows no index, so it carries only idx's first image.
//
// Entries are in a fixed order and every mtime is mtime, so the same index
// gives the same tarball. The file appears only when complete.
func WriteArchive(path string, idx v1.ImageIndex, ref name.Tag, mtime time.Time) error {
	blobs, docker, err := collect(idx, ref)
	if err != nil {
		return err
	}
	top := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add: idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{
			AnnotationContainerdName: ContainerdName(ref),
			AnnotationRefName:        ref.TagStr(),
		}},
	})
	indexJSON, err := top.RawManifest()
	if err != nil {
		return fmt.Errorf("index.json: %w", err)
	}
	manifestJSON, err := json.Marshal(docker)
	if err != nil {
		return fmt.Errorf("manifest.json: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = writeTar(tmp, mtime.UTC().Truncate(time.Second), indexJSON, manifestJSON, blobs)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// CreateTemp makes the file private; an archive is for anyone.
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write image archive %s: %w", path, err)
	}
	return nil
}

// blob is one file under blobs/sha256/.
type blob struct {
	digest v1.Hash
	open   func() (io.ReadCloser, error)
	size   int64
}

// collect lists every blob of idx (itself, its manifests, configs and
// compressed layers), once each and sorted by digest, and the docker-save
// manifest of its first image.
func collect(idx v1.ImageIndex, ref name.Tag) ([]blob, tarball.Manifest, error) {
	byDigest := map[v1.Hash]blob{}
	add := func(d v1.Hash, raw []byte) {
		byDigest[d] = blob{digest: d, size: int64(len(raw)), open: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(raw)), nil
		}}
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return nil, nil, fmt.Errorf("index manifest: %w", err)
	}
	d, err := idx.Digest()
	if err != nil {
		return nil, nil, err
	}
	add(d, raw)
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	var docker tarball.Manifest
	for i, desc := range im.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, nil, fmt.Errorf("image %s of the index: %w", desc.Digest, err)
		}
		raw, err := img.RawManifest()
		if err != nil {
			return nil, nil, fmt.Errorf("manifest of image %s: %w", desc.Digest, err)
		}
		add(desc.Digest, raw)
		cfg, err := img.RawConfigFile()
		if err != nil {
			return nil, nil, fmt.Errorf("config of image %s: %w", desc.Digest, err)
		}
		cd, err := img.ConfigName()
		if err != nil {
			return nil, nil, err
		}
		add(cd, cfg)
		entry := tarball.Descriptor{Config: blobPath(cd), RepoTags: []string{ContainerdName(ref)}}
		layers, err := img.Layers()
		if err != nil {
			return nil, nil, fmt.Errorf("layers of image %s: %w", desc.Digest, err)
		}
		for _, l := range layers {
			ld, err := l.Digest()
			if err != nil {
				return nil, nil, err
			}
			size, err := l.Size()
			if err != nil {
				return nil, nil, err
			}
			byDigest[ld] = blob{digest: ld, size: size, open: l.Compressed}
			entry.Layers = append(entry.Layers, blobPath(ld))
		}
		if i == 0 {
			docker = append(docker, entry)
		}
	}
	blobs := make([]blob, 0, len(byDigest))
	for _, b := range byDigest {
		blobs = append(blobs, b)
	}
	slices.SortFunc(blobs, func(a, b blob) int { return strings.Compare(a.digest.String(), b.digest.String()) })
	return blobs, docker, nil
}

// blobPath is where the OCI layout keeps the blob of digest d.
func blobPath(d v1.Hash) string { return "blobs/" + d.Algorithm + "/" + d.Hex }

// writeTar writes the archive's entries in a fixed order.
func writeTar(w io.Writer, mtime time.Time, indexJSON, manifestJSON []byte, blobs []blob) error {
	tw := tar.NewWriter(w)
	small := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := small("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := small("index.json", indexJSON); err != nil {
		return err
	}
	if err := small("manifest.json", manifestJSON); err != nil {
		return err
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: mtime}); err != nil {
			return err
		}
	}
	for _, b := range blobs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: blobPath(b.digest), Mode: 0o644, Size: b.size, ModTime: mtime}); err != nil {
			return err
		}
		rc, err := b.open()
		if err != nil {
			return fmt.Errorf("open blob %s: %w", b.digest, err)
		}
		n, err := io.Copy(tw, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("copy blob %s: %w", b.digest, err)
		}
		if n != b.size {
			return fmt.Errorf("blob %s: %d bytes, its descriptor says %d", b.digest, n, b.size)
		}
	}
	return tw.Close()
}

// Push writes idx, every image and blob of it, to the registry as ref,
// with the credentials `docker login` keeps (the default keychain), and
// returns the digest the registry now serves ref at.
func Push(ctx context.Context, idx v1.ImageIndex, ref name.Tag, opts ...remote.Option) (v1.Hash, error) {
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	desc, err := remote.Head(ref, opts...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("read back %s after the push: %w", ref, err)
	}
	return desc.Digest, nil
}
