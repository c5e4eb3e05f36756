package cli_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/sidecarset/sidecarset/internal/cli"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// offline runs the command with a kubeconfig that does not exist, so any
// attempt to reach a cluster fails the test.
func offline(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	o := cli.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	cmd := cli.NewCmdRoot(o)
	cmd.SetArgs(append([]string{"--kubeconfig", filepath.Join(t.TempDir(), "no-kubeconfig")}, args...))
	err := cmd.Execute()
	return result{out: out.String(), errOut: errOut.String(), err: err}
}

// golden compares got with the file, or writes it with -update.
func golden(t *testing.T, file, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", file, diff)
	}
}

func TestInjectOffline(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		args        []string
	}{
		// Every kind with a pod template, a List, a Namespace document
		// giving labels, -n for objects without a namespace, a document
		// nothing matches, a SidecarSet the webhook would refuse.
		{name: "workloads", input: "workloads.yaml", args: []string{"-n", "shop"}},
		// A namespace known by its name only.
		{name: "offline-namespace", input: "offline-namespace.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "inject")
			args := append([]string{"inject", "-f", filepath.Join(dir, tc.input), "--sidecarsets", filepath.Join(dir, "sidecarsets.yaml")}, tc.args...)
			r := offline(t, "", args...)
			if r.err != nil {
				t.Fatalf("inject: %v\nstderr:\n%s", r.err, r.errOut)
			}
			golden(t, filepath.Join(dir, tc.name+".out.yaml"), r.out)
			golden(t, filepath.Join(dir, tc.name+".stderr"), r.errOut)

			// Injecting the output again changes nothing: the records stop
			// a second injection, as they stop the webhook's reinvocation.
			again := offline(t, r.out, append([]string{"inject", "-f", "-", "--sidecarsets", filepath.Join(dir, "sidecarsets.yaml")}, tc.args...)...)
			if again.err != nil {
				t.Fatal(again.err)
			}
			if diff := cmp.Diff(r.out, again.out); diff != "" {
				t.Errorf("second injection changed the output (-first +second):\n%s", diff)
			}
		})
	}
}

func TestInjectOfflineErrors(t *testing.T) {
	dir := t.TempDir()
	kruise := filepath.Join(dir, "kruise.yaml")
	if err := os.WriteFile(kruise, []byte("apiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata: {name: k}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("apiVersion: sidecarset.dev/v1alpha1\nkind: SidecarSet\nmetadata: {name: t}\nspec:\n  selector: {matchLabels: {a: b}}\n  containerz: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"inject", "--sidecarsets", kruise}, "-f is required"},
		{[]string{"inject", "-f", "-", "--sidecarsets", kruise}, "an OpenKruise SidecarSet; convert it first: kubectl sidecarset convert -f FILE"},
		{[]string{"inject", "-f", "-", "--sidecarsets", typo}, `unknown field "containerz"`},
		{[]string{"inject", "-f", filepath.Join(dir, "missing.yaml"), "--sidecarsets", filepath.Join("testdata", "inject", "sidecarsets.yaml")}, "-f " + filepath.Join(dir, "missing.yaml")},
	} {
		r := offline(t, "", tc.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, r.err, tc.want)
		}
	}
}

func TestConvert(t *testing.T) {
	for _, name := range []string{
		// apps.kruise.io/v1alpha1 with every spec field of OpenKruise's
		// API: spec.namespace, a partition percentage with a selector, a
		// hot upgrade, an upgradeType OpenKruise upgrades cold.
		"v1alpha1",
		// apps.kruise.io/v1beta1: namespaceSelector, customVersion, a canary
		// set, shareVolumePolicy and transferEnv as OpenKruise reads them
		// (both sources, both name forms, a type it ignores), a hot upgrade
		// on a container and on an init container, a partition percentage
		// OpenKruise rounds otherwise, and fields no version of OpenKruise
		// has.
		"v1beta1",
		// A List from kubectl get -o yaml: OpenKruise's defaults, its hash
		// annotations, kubectl's last applied configuration, server-set
		// metadata and status; namespaceSelector.namespaces, which
		// OpenKruise's API lacks; documents that are not SidecarSets.
		"list",
		// resourcesPolicy spelt as OpenKruise's samples still spell it,
		// before its fields were renamed.
		"legacy-names",
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "convert")
			r := offline(t, "", "convert", "-f", filepath.Join(dir, name+".yaml"))
			if r.err != nil {
				t.Fatalf("convert: %v\nstderr:\n%s", r.err, r.errOut)
			}
			golden(t, filepath.Join(dir, name+".out.yaml"), r.out)
			golden(t, filepath.Join(dir, name+".stderr"), r.errOut)
		})
	}

	conflict := "apiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata: {name: c}\nspec:\n  namespace: a\n  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: b}}\n  selector: {matchLabels: {x: y}}\n"
	r := offline(t, conflict, "convert", "-f", "-")
	if r.err == nil || !strings.Contains(r.err.Error(), `-f -, SidecarSet c: spec.namespace "a" and a namespaceSelector on kubernetes.io/metadata.name=b select no namespace together`) {
		t.Errorf("conflicting namespaces: %v", r.err)
	}
	r = offline(t, "", "convert")
	if r.err == nil || !strings.Contains(r.err.Error(), "-f is required") {
		t.Errorf("convert without -f: %v", r.err)
	}
}
