package cli_test

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
)

// probeSets lists the probe SidecarSets left in the cluster.
func probeSets(t *testing.T) []string {
	t.Helper()
	var list v1alpha1.SidecarSetList
	if err := env.Client.List(t.Context(), &list, client.HasLabels{cli.LabelPreflight}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		if s.DeletionTimestamp == nil {
			names = append(names, s.Name)
		}
	}
	return names
}

func TestPreflight(t *testing.T) {
	f := newFixture(t)
	r := ok(t, "preflight", "-n", f.NS, "--timeout", "30s")
	ls := lines(r.out)
	if len(ls) != 3 {
		t.Fatalf("want 3 lines, got:\n%s", r.out)
	}
	mustContain(t, ls[0], "SidecarSet validating webhook: answered (", `admission webhook "sidecarsets.sidecarset.dev" denied the request`, "spec.selector")
	mustContain(t, ls[1], "pod mutating webhook: answered (", "injected probe SidecarSet sidecarset-preflight-", "into a dry-run pod in namespace "+f.NS)
	mustContain(t, ls[2], "preflight passed: both webhooks answer")
	if left := probeSets(t); len(left) > 0 {
		t.Errorf("probe SidecarSets left behind: %v", left)
	}

	r = kubectl(t, false, "preflight", "-n", "kube-system")
	if r.err == nil || !strings.Contains(r.err.Error(), "-n kube-system: the pod webhook never sees system namespaces") {
		t.Errorf("preflight in kube-system: %v", r.err)
	}
	r = kubectl(t, false, "preflight", "-n", "no-such-namespace")
	if r.err == nil || !strings.Contains(r.err.Error(), "-n no-such-namespace: the probe pod needs an existing namespace") {
		t.Errorf("preflight in a missing namespace: %v", r.err)
	}
}

func TestPreflightManagerDown(t *testing.T) {
	f := newFixture(t)
	sys.StopManager()
	defer func() {
		if err := sys.StartManager(); err != nil {
			t.Fatalf("restart the manager: %v", err)
		}
	}()

	r := kubectl(t, false, "preflight", "-n", f.NS, "--timeout", "2s")
	if !errors.Is(r.err, cli.ErrPreflight) {
		t.Fatalf("error %v, want one wrapping ErrPreflight", r.err)
	}
	mustContain(t, r.err.Error(), "a webhook did not answer within --timeout 2s")
	ls := lines(r.out)
	if len(ls) != 2 {
		t.Fatalf("want 2 lines, got:\n%s", r.out)
	}
	mustContain(t, ls[0], "SidecarSet validating webhook: did NOT answer (", "registered but not answering", "failed calling webhook")
	mustContain(t, ls[1], "pod mutating webhook: did NOT answer (", "could not create the probe SidecarSet, so injection was not tried")
	if left := probeSets(t); len(left) > 0 {
		t.Errorf("probe SidecarSets left behind: %v", left)
	}
}
