// Command importguard fails when a package that decides without a cluster
// depends on a Kubernetes client, directly or through any package it imports.
//
// The pure packages (inject, policy, revision, rollout, status, validation) take plain
// values and return plain values; the controllers and webhooks read and write
// the cluster around them. Types from k8s.io/api and k8s.io/apimachinery are
// fine; k8s.io/client-go and sigs.k8s.io/controller-runtime are not.
//
// Usage, anywhere in the module:
//
//	go run ./hack/importguard [PACKAGE...]
//
// Without arguments it checks the pure packages and their subpackages.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// purePackages are the packages that must not depend on a client.
var purePackages = []string{
	"github.com/sidecarset/sidecarset/internal/adopt/...",
	"github.com/sidecarset/sidecarset/internal/imageref/...",
	"github.com/sidecarset/sidecarset/internal/inject/...",
	"github.com/sidecarset/sidecarset/internal/policy/...",
	"github.com/sidecarset/sidecarset/internal/revision/...",
	"github.com/sidecarset/sidecarset/internal/rollout/...",
	"github.com/sidecarset/sidecarset/internal/scope/...",
	"github.com/sidecarset/sidecarset/internal/status/...",
	"github.com/sidecarset/sidecarset/internal/validation/...",
}

// clientPrefixes are the import paths a pure package must not reach: each
// one and everything under it.
var clientPrefixes = []string{
	"k8s.io/client-go",
	"sigs.k8s.io/controller-runtime",
}

func main() {
	patterns := os.Args[1:]
	if len(patterns) == 0 {
		patterns = purePackages
	}
	pkgs, err := list(patterns)
	if err != nil {
		fmt.Fprintf(os.Stderr, "importguard: %v\n", err)
		os.Exit(2)
	}
	found := violations(pkgs, clientPrefixes)
	for _, v := range found {
		fmt.Fprintf(os.Stderr, "%s must not depend on a Kubernetes client: %s\n", v.Package, strings.Join(v.Chain, " -> "))
	}
	if len(found) > 0 {
		os.Exit(1)
	}
}

// listedPackage is the part of `go list -json` this command reads.
type listedPackage struct {
	ImportPath string
	Imports    []string
	// DepOnly is true for a package that is only a dependency of the
	// packages asked for, not one of them.
	DepOnly bool
}

// violation is a pure package and the shortest import chain from it to a
// client package, both ends included.
type violation struct {
	Package string
	Chain   []string
}

// list runs `go list -deps` over patterns and returns every package it names:
// the ones asked for and all they import.
func list(patterns []string) ([]listedPackage, error) {
	args := append([]string{"list", "-deps", "-json=ImportPath,Imports,DepOnly"}, patterns...)
	var stderr bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the output of go list: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// violations returns, for each package asked for (not DepOnly) that reaches a
// path under one of forbidden, the shortest import chain to the nearest such
// path, in the order the packages were listed. A forbidden package itself
// asked for is a violation with a chain of one.
//
// Worked cases, each a row of TestViolations:
//   - a imports k8s.io/api/core/v1 only: no violation;
//   - a imports sigs.k8s.io/controller-runtime/pkg/client: a -> that package;
//   - a imports b, b imports k8s.io/client-go/rest: a -> b -> k8s.io/client-go/rest;
//   - a imports k8s.io/client-gopher (a name that merely starts alike): no violation.
func violations(pkgs []listedPackage, forbidden []string) []violation {
	imports := make(map[string][]string, len(pkgs))
	for _, p := range pkgs {
		imports[p.ImportPath] = p.Imports
	}
	var found []violation
	for _, p := range pkgs {
		if p.DepOnly {
			continue
		}
		if chain := shortestChain(p.ImportPath, imports, forbidden); chain != nil {
			found = append(found, violation{Package: p.ImportPath, Chain: chain})
		}
	}
	return found
}

// shortestChain walks the import graph breadth first from root and returns
// the path to the first package under a forbidden prefix, or nil.
func shortestChain(root string, imports map[string][]string, forbidden []string) []string {
	parent := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if isForbidden(p, forbidden) {
			var chain []string
			for q := p; q != ""; q = parent[q] {
				chain = append(chain, q)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, next := range imports[p] {
			if _, seen := parent[next]; !seen {
				parent[next] = p
				queue = append(queue, next)
			}
		}
	}
	return nil
}

// isForbidden reports whether path is one of prefixes or lies under one.
func isForbidden(path string, prefixes []string) bool {
	for _, prefix := range prefixes {
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			return true
		}
	}
	return false
}
