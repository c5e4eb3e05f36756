package dist

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestArchiveName(t *testing.T) {
	tests := []struct {
		p    Platform
		want string
	}{
		{Platform{"linux", "amd64"}, "kubectl-sidecarset_v0.1.0_linux_amd64.tar.gz"},
		{Platform{"darwin", "arm64"}, "kubectl-sidecarset_v0.1.0_darwin_arm64.tar.gz"},
		{Platform{"windows", "amd64"}, "kubectl-sidecarset_v0.1.0_windows_amd64.tar.gz"},
	}
	for _, tt := range tests {
		if got := ArchiveName("v0.1.0", tt.p); got != tt.want {
			t.Errorf("ArchiveName(v0.1.0, %s) = %q, want %q", tt.p, got, tt.want)
		}
	}
}

func TestParsePlatform(t *testing.T) {
	tests := []struct {
		in      string
		want    Platform
		wantErr string
	}{
		{in: "linux/arm64", want: Platform{"linux", "arm64"}},
		{in: "windows/amd64", want: Platform{"windows", "amd64"}},
		{in: "linux", wantErr: "want os/arch"},
		{in: "linux/386", wantErr: "a release is built for"},
		{in: "plan9/amd64", wantErr: "a release is built for"},
	}
	for _, tt := range tests {
		got, err := ParsePlatform(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePlatform(%q) error %v, want one saying %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParsePlatform(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// TestWriteArchive: the archive holds the binary alone, under the name
// krew's manifest gives as bin, executable; the same input gives the same
// bytes.
func TestWriteArchive(t *testing.T) {
	mtime := time.Unix(1700000000, 0)
	for _, p := range []Platform{{"linux", "amd64"}, {"windows", "arm64"}} {
		var a, b bytes.Buffer
		if err := WriteArchive(&a, p, []byte("binary of "+p.String()), []byte("license"), mtime); err != nil {
			t.Fatal(err)
		}
		if err := WriteArchive(&b, p, []byte("binary of "+p.String()), []byte("license"), mtime); err != nil {
			t.Fatal(err)
		}
		if Sum(a.Bytes()) != Sum(b.Bytes()) {
			t.Errorf("%s: two archives of the same binary differ", p)
		}
		gz, err := gzip.NewReader(&a)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(gz)
		type entry struct {
			Name    string
			Mode    int64
			ModTime time.Time
			Body    string
		}
		var got []entry
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, entry{hdr.Name, hdr.Mode, hdr.ModTime, string(body)})
		}
		want := []entry{{p.BinaryName(), 0o755, mtime, "binary of " + p.String()}, {License, 0o644, mtime, "license"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s archive (-want +got):\n%s", p, diff)
		}
	}
}

func TestManifestNeedsEverySum(t *testing.T) {
	sums := placeholders()
	delete(sums, Platform{"darwin", "arm64"})
	if _, err := Manifest("v0.1.0", sums); err == nil || !strings.Contains(err.Error(), "darwin/arm64") {
		t.Errorf("Manifest without darwin/arm64's sum: error %v, want one naming it", err)
	}
}

// TestManifestPlatforms: one entry per platform, each selecting its os and
// arch, downloading its archive from the release, checked by its own sum.
func TestManifestPlatforms(t *testing.T) {
	sums := map[Platform]string{}
	for i, p := range Platforms {
		sums[p] = strings.Repeat(string(rune('a'+i)), 64)
	}
	out, err := Manifest("v1.2.3", sums)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.UnmarshalStrict(out, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Spec.Platforms) != len(Platforms) {
		t.Fatalf("%d platforms in the manifest, want %d", len(m.Spec.Platforms), len(Platforms))
	}
	for i, p := range Platforms {
		got := m.Spec.Platforms[i]
		want := platform{
			Selector: selector{MatchLabels: map[string]string{"os": p.OS, "arch": p.Arch}},
			URI:      "https://github.com/sidecarset/sidecarset/releases/download/v1.2.3/" + ArchiveName("v1.2.3", p),
			Sha256:   sums[p],
			Files:    []file{{From: p.BinaryName(), To: "."}, {From: License, To: "."}},
			Bin:      p.BinaryName(),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("platform %s (-want +got):\n%s", p, diff)
		}
	}
	if m.Spec.Version != "v1.2.3" || m.Metadata.Name != "sidecarset" {
		t.Errorf("manifest of %s named %s, want v1.2.3 and sidecarset", m.Spec.Version, m.Metadata.Name)
	}
}

// TestCheckedInManifest: plugins/sidecarset.yaml is the manifest of the
// chart's appVersion with placeholder sums, as Manifest writes it.
func TestCheckedInManifest(t *testing.T) {
	chart, err := os.ReadFile("../../charts/sidecarset/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &meta); err != nil {
		t.Fatal(err)
	}
	want, err := Manifest(meta.AppVersion, placeholders())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../plugins/sidecarset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("plugins/sidecarset.yaml is not the manifest of appVersion %s; write it with `go run ./hack/dist -version %[1]s -placeholders plugins/sidecarset.yaml` (-want +got):\n%s", meta.AppVersion, diff)
	}
}

func placeholders() map[Platform]string {
	sums := map[Platform]string{}
	for _, p := range Platforms {
		sums[p] = PlaceholderSum
	}
	return sums
}
