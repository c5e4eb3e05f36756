package kubeletsim

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestParseImage(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in, want string
		wantErr  bool
	}{
		{in: "nginx", want: "docker.io/library/nginx:latest"},
		{in: "nginx:1.25", want: "docker.io/library/nginx:1.25"},
		{in: "prom/mysqld-exporter:v0.15", want: "docker.io/prom/mysqld-exporter:v0.15"},
		{in: "docker.io/nginx:1.25", want: "docker.io/library/nginx:1.25"},
		{in: "index.docker.io/library/nginx", want: "docker.io/library/nginx:latest"},
		{in: "ghcr.io/org/app:v1", want: "ghcr.io/org/app:v1"},
		{in: "localhost/app", want: "localhost/app:latest"},
		{in: "localhost:5000/app:v1", want: "localhost:5000/app:v1"},
		{in: "registry.local:5000/a/b/c", want: "registry.local:5000/a/b/c:latest"},
		{in: "nginx@" + digest, want: "docker.io/library/nginx@" + digest},
		{in: "nginx:1.25@" + digest, want: "docker.io/library/nginx:1.25@" + digest},
		{in: "Nginx:1.25", wantErr: true},
		{in: "nginx:", wantErr: true},
		{in: "", wantErr: true},
		{in: " nginx", wantErr: true},
	} {
		got, err := parseImage(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("parseImage(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if err == nil && got.String() != tc.want {
			t.Errorf("parseImage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestBehaviourOf(t *testing.T) {
	zeroDigest := "sha256:" + strings.Repeat("0", 64)
	for in, want := range map[string]behaviour{
		"nginx:1.25":                    runsForever,
		"example.com/pull-fails/app:v1": pullFails,
		"crashes:v1":                    crashes,
		"job-completes:v1":              completes,
		"never-ready:v1":                neverReady,
		"turns-unready:v1":              turnsUnready,
		// The tag names one too, as people name a broken build.
		"fluent-bit:crashes":   crashes,
		"app:v2-pull-fails":    pullFails,
		"registry:5000/app:v1": runsForever,
		"app@" + zeroDigest:    runsForever,
	} {
		ref, err := parseImage(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := behaviourOf(ref); got != want {
			t.Errorf("behaviourOf(%q) = %v, want %v", in, got, want)
		}
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func mustParse(t *testing.T, s string) imageRef {
	t.Helper()
	r, err := parseImage(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistry(t *testing.T) {
	reg := &registry{}
	v1 := mustParse(t, "app:v1")
	if got, want := reg.resolve(v1), sha("docker.io/library/app:v1"); got != want {
		t.Errorf("default digest of app:v1 = %s, want sha256 of the normalized reference %s", got, want)
	}
	pinned := "sha256:" + strings.Repeat("0", 64)
	if got := reg.resolve(mustParse(t, "app@"+pinned)); got != pinned {
		t.Errorf("a digest reference resolves to %s, want its own digest", got)
	}

	repushed := "sha256:" + strings.Repeat("1", 64)
	cm := RegistryConfigMap(map[string]string{"app:v1": repushed})
	cm.Data["notes"] = "# comments and blank lines are fine\n\ndocker.io/library/other:v2 " + pinned + "\nbroken line here\n"
	if err := reg.load(cm); err == nil || !strings.Contains(err.Error(), "broken line here") {
		t.Errorf("load() error = %v, want one naming the broken line", err)
	}
	if got := reg.resolve(v1); got != repushed {
		t.Errorf("after the re-push app:v1 resolves to %s, want %s", got, repushed)
	}
	if got := reg.resolve(mustParse(t, "other:v2")); got != pinned {
		t.Errorf("other:v2 resolves to %s, want %s (whitespace-separated line, normalized key)", got, pinned)
	}
	for k := range cm.Data {
		if strings.ContainsAny(k, ":/") {
			t.Errorf("RegistryConfigMap key %q is not a valid ConfigMap key", k)
		}
	}

	if err := reg.load(nil); err != nil {
		t.Fatal(err)
	}
	if got, want := reg.resolve(v1), sha("docker.io/library/app:v1"); got != want {
		t.Errorf("without the ConfigMap app:v1 resolves to %s, want the default %s", got, want)
	}
}

func TestNodeImagesShowTheFirstTagOfADigest(t *testing.T) {
	reg := &registry{}
	node := newNodeImages()
	v1, v2 := mustParse(t, "app:v1"), mustParse(t, "app:v2")
	d1 := reg.resolve(v1)
	if err := reg.load(&corev1.ConfigMap{Data: map[string]string{"x": "app:v2=" + d1}}); err != nil {
		t.Fatal(err)
	}

	node.record(v1, d1)
	node.record(v2, reg.resolve(v2))
	type shown struct{ Image, ImageID string }
	var got shown
	got.Image, got.ImageID = node.describe(v2, d1)
	want := shown{Image: "docker.io/library/app:v1", ImageID: "docker.io/library/app@" + d1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("app:v2 sharing app:v1's digest (-want +got):\n%s", diff)
	}

	// Another node never saw app:v1: it shows the tag it pulled.
	other := newNodeImages()
	other.record(v2, d1)
	got.Image, got.ImageID = other.describe(v2, d1)
	if want := (shown{Image: "docker.io/library/app:v2", ImageID: "docker.io/library/app@" + d1}); !cmp.Equal(want, got) {
		t.Errorf("on a fresh node: %+v, want %+v", got, want)
	}

	// A re-pull after a re-push moves the tag to the new digest.
	d2 := "sha256:" + strings.Repeat("2", 64)
	node.record(v1, d2)
	if d, _ := node.present(v1); d != d2 {
		t.Errorf("app:v1 on the node is %s after the re-pull, want %s", d, d2)
	}
	got.Image, _ = node.describe(v2, d1)
	if got.Image != "docker.io/library/app:v2" {
		t.Errorf("the old digest now shows %s, want its remaining tag app:v2", got.Image)
	}
}

// TestDigestAndImageID: what tests compare with what a node reports after
// pulling a tag nobody re-pushed.
func TestDigestAndImageID(t *testing.T) {
	for _, tc := range []struct{ ref, digest, imageID string }{
		{"exporter:v1", sha("docker.io/library/exporter:v1"), "docker.io/library/exporter@" + sha("docker.io/library/exporter:v1")},
		{"ghcr.io/team/shipper:v2", sha("ghcr.io/team/shipper:v2"), "ghcr.io/team/shipper@" + sha("ghcr.io/team/shipper:v2")},
	} {
		digest, err := Digest(tc.ref)
		if err != nil || digest != tc.digest {
			t.Errorf("Digest(%q) = %q, %v; want %q", tc.ref, digest, err, tc.digest)
		}
		id, err := ImageID(tc.ref)
		if err != nil || id != tc.imageID {
			t.Errorf("ImageID(%q) = %q, %v; want %q", tc.ref, id, err, tc.imageID)
		}
	}
	if _, err := ImageID("Not A Reference"); err == nil {
		t.Error("ImageID of an invalid reference: no error")
	}
}
