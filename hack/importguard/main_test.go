package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestViolations(t *testing.T) {
	const (
		a      = "example.com/a"
		b      = "example.com/b"
		core   = "k8s.io/api/core/v1"
		client = "sigs.k8s.io/controller-runtime/pkg/client"
		rest   = "k8s.io/client-go/rest"
	)
	tests := []struct {
		name string
		pkgs []listedPackage
		want []violation
	}{{
		name: "API types only",
		pkgs: []listedPackage{
			{ImportPath: a, Imports: []string{core}},
			{ImportPath: core, DepOnly: true},
		},
	}, {
		name: "a client imported directly",
		pkgs: []listedPackage{
			{ImportPath: a, Imports: []string{core, client}},
			{ImportPath: core, DepOnly: true},
			{ImportPath: client, Imports: []string{rest}, DepOnly: true},
			{ImportPath: rest, DepOnly: true},
		},
		want: []violation{{Package: a, Chain: []string{a, client}}},
	}, {
		name: "a client reached through another package",
		pkgs: []listedPackage{
			{ImportPath: a, Imports: []string{b}},
			{ImportPath: b, Imports: []string{rest}, DepOnly: true},
			{ImportPath: rest, DepOnly: true},
		},
		want: []violation{{Package: a, Chain: []string{a, b, rest}}},
	}, {
		name: "the shortest of two chains",
		pkgs: []listedPackage{
			{ImportPath: a, Imports: []string{b, client}},
			{ImportPath: b, Imports: []string{rest}, DepOnly: true},
			{ImportPath: client, DepOnly: true},
			{ImportPath: rest, DepOnly: true},
		},
		want: []violation{{Package: a, Chain: []string{a, client}}},
	}, {
		name: "a name that merely starts like a client",
		pkgs: []listedPackage{
			{ImportPath: a, Imports: []string{"k8s.io/client-gopher"}},
			{ImportPath: "k8s.io/client-gopher", DepOnly: true},
		},
	}, {
		name: "every package asked for is checked, a dependency is not",
		pkgs: []listedPackage{
			{ImportPath: a, Imports: []string{b}},
			{ImportPath: b, Imports: []string{rest}},
			{ImportPath: rest, DepOnly: true},
		},
		want: []violation{
			{Package: a, Chain: []string{a, b, rest}},
			{Package: b, Chain: []string{b, rest}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := violations(tt.pkgs, clientPrefixes)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGoList runs the whole check, go list included, over the packages in
// testdata: one that imports a client, one that reaches it through the
// first, and one with API types only.
func TestGoList(t *testing.T) {
	const fixtures = "github.com/sidecarset/sidecarset/hack/importguard/testdata/"
	pkgs, err := list([]string{"./testdata/direct", "./testdata/indirect", "./testdata/clean"})
	if err != nil {
		t.Fatal(err)
	}
	want := []violation{
		{Package: fixtures + "direct", Chain: []string{fixtures + "direct", "sigs.k8s.io/controller-runtime/pkg/client"}},
		{Package: fixtures + "indirect", Chain: []string{fixtures + "indirect", fixtures + "direct", "sigs.k8s.io/controller-runtime/pkg/client"}},
	}
	if diff := cmp.Diff(want, violations(pkgs, clientPrefixes)); diff != "" {
		t.Errorf("violations of the fixtures (-want +got):\n%s", diff)
	}
}
