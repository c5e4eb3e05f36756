package imageref

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// digestOf is a digest as a registry gives one, for s's content.
func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestSame(t *testing.T) {
	a, b := digestOf("x:v1"), digestOf("x:v2")
	tests := []struct {
		recorded, inSpec string
		want             bool
	}{
		// The worked cases of Same's doc comment.
		{"x:v1", "x:v1", true},
		{"nginx:1", "docker.io/library/nginx:1", true},
		{"nginx", "index.docker.io/nginx:latest", true},
		{"x:v1", "x:v1@" + a, true},
		{"r.io/x:v1@" + a, "mirror.io/x@" + a, true},
		{"x:v1", "x:v2", false},
		{"x@" + a, "x@" + b, false},
		{"x:v1", "mirror.io/x:v1", false},
		{"x:v1", "x@" + a, false},
		{"x:v1@" + a, "x:v1", false},
		{"x:v1", "x:v1@" + a + "@" + a, false},

		// The rest of the rules.
		{"docker.io/library/nginx:1", "nginx:1", true},
		{"team/app:1", "docker.io/team/app:1", true},
		{"team/app:1", "docker.io/library/team/app:1", false},
		{"nginx", "nginx@" + a, false},
		{"nginx", "nginx:latest@" + a, true},
		{"x:v1@" + a, "x:v2@" + a, true},
		{"localhost:5000/x:v1", "localhost:5000/x:v1@" + a, true},
		{"localhost:5000/x", "localhost:5000/x:latest", true},
		{"localhost:5000/x", "localhost:5001/x", false},
		{"r.io:443/x:v1", "r.io/x:v1", false},
		{"x:v1", "x:v1@sha256:short", false},
		{"x:v1", "x:", false},
		{"x:v1", "", false},
		{"", "", true},
		// The runtime refuses an uppercase repository: it means nothing.
		{"X:v1", "docker.io/library/X:v1", false},
		{"R.io/x:v1", "R.io/x:v1@" + a, true},
	}
	for _, tt := range tests {
		t.Run(tt.recorded+" vs "+tt.inSpec, func(t *testing.T) {
			if got := Same(tt.recorded, tt.inSpec); got != tt.want {
				t.Errorf("Same(%q, %q) = %v, want %v", tt.recorded, tt.inSpec, got, tt.want)
			}
		})
	}
}

func TestDigests(t *testing.T) {
	d := digestOf("a")
	tests := []struct {
		in               string
		wantID, wantSpec string
	}{
		{in: "x:v1"},
		{in: "registry:5000/x:v1"},
		{in: "x@" + d, wantID: d, wantSpec: d},
		{in: "registry:5000/x:v1@" + d, wantID: d, wantSpec: d},
		{in: d, wantID: d},
		{in: "docker-pullable://x@" + d, wantID: d},
		{in: "docker://" + d, wantID: d},
		{in: "x@sha256:short"},
		{in: "x@sha256:" + "Z" + d[len("sha256:")+1:]},
	}
	for _, tt := range tests {
		if got := IDDigest(tt.in); got != tt.wantID {
			t.Errorf("IDDigest(%q) = %q, want %q", tt.in, got, tt.wantID)
		}
		if got := Digest(tt.in); got != tt.wantSpec {
			t.Errorf("Digest(%q) = %q, want %q", tt.in, got, tt.wantSpec)
		}
	}
	if !SameID("docker.io/library/x@"+d, "mirror.io/x@"+d) || SameID("x@"+d, "x@"+digestOf("b")) || !SameID("", "") {
		t.Error("SameID: want imageIDs compared by digest")
	}
}

// TestParse: Docker Hub's defaults, and the tag a reference pulls, which
// decides the apiserver's default imagePullPolicy.
func TestParse(t *testing.T) {
	d := digestOf("a")
	tests := []struct {
		in   string
		want Ref
		err  bool
	}{
		{in: "nginx", want: Ref{Repo: "docker.io/library/nginx", Tag: "latest"}},
		{in: "nginx:1.25", want: Ref{Repo: "docker.io/library/nginx", Tag: "1.25", ExplicitTag: true}},
		{in: "ghcr.io/a/b@" + d, want: Ref{Repo: "ghcr.io/a/b", Digest: d}},
		{in: "localhost:5000/x:v1@" + d, want: Ref{Repo: "localhost:5000/x", Tag: "v1", ExplicitTag: true, Digest: d}},
		{in: "Nginx", err: true},
		{in: "", err: true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}
