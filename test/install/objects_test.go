//go:build e2e

package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/google/go-cmp/cmp"
)

// The chart's webhook configurations, PodDisruptionBudget and CRD.
const (
	mutatingWebhooks   = "sidecarset-mutating"
	validatingWebhooks = "sidecarset-validating"
	pdbName            = "sidecarset-manager"
	crdName            = "sidecarsets.sidecarset.dev"
)

// caBundles returns the CA bundle of every webhook of the chart's two
// webhook configurations, by configuration and webhook name.
func caBundles(ctx context.Context, c client.Client) (map[string][]byte, error) {
	bundles := map[string][]byte{}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: mutatingWebhooks}, m); err != nil {
		return nil, fmt.Errorf("get MutatingWebhookConfiguration %s: %w", mutatingWebhooks, err)
	}
	for _, w := range m.Webhooks {
		bundles[m.Name+"/"+w.Name] = w.ClientConfig.CABundle
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: validatingWebhooks}, v); err != nil {
		return nil, fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", validatingWebhooks, err)
	}
	for _, w := range v.Webhooks {
		bundles[v.Name+"/"+w.Name] = w.ClientConfig.CABundle
	}
	return bundles, nil
}

// podDisruptionBudget returns the chart's PodDisruptionBudget once
// kube-controller-manager has counted the manager's pods in its status.
func podDisruptionBudget(ctx context.Context, c client.Client) (*policyv1.PodDisruptionBudget, error) {
	pdb := &policyv1.PodDisruptionBudget{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pdbName}, pdb); err != nil {
			return false, err
		}
		return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.ExpectedPods > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for PodDisruptionBudget %s to count the manager's pods: %w", pdbName, err)
	}
	return pdb, nil
}

// released says whether an object is the release's: it carries the
// release's instance label or Helm's release annotation, or its name or
// namespace names the project.
func released(o metav1.Object) bool {
	return o.GetLabels()["app.kubernetes.io/instance"] == release ||
		o.GetAnnotations()["meta.helm.sh/release-name"] == release ||
		strings.Contains(o.GetName(), "sidecarset") ||
		o.GetNamespace() == namespace
}

// inventory lists every object of every kind the apiserver serves,
// cluster-wide and in every namespace, that is the release's (released),
// as "resource.group namespace/name". Events are left out: the apiserver
// keeps them for their time to live, whoever they are about.
func inventory(t *testing.T, cfg *rest.Config) []string {
	t.Helper()
	// Deprecated kinds (v1 Endpoints, ComponentStatus) are listed too,
	// without a warning each time.
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := disco.ServerPreferredResources()
	if err != nil {
		t.Fatalf("discover the apiserver's resources: %v", err)
	}
	var found []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || strings.Contains(r.Name, "/") || r.Name == "events" {
				continue
			}
			objs, err := dyn.Resource(gv.WithResource(r.Name)).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("list %s in %s: %v", r.Name, l.GroupVersion, err)
			}
			for _, o := range objs.Items {
				if !released(&o) {
					continue
				}
				name := o.GetName()
				if o.GetNamespace() != "" {
					name = o.GetNamespace() + "/" + name
				}
				found = append(found, fmt.Sprintf("%s.%s %s", r.Name, gv.Group, name))
			}
		}
	}
	slices.Sort(found)
	return found
}

// checkUninstalled waits until what the release made is gone: of the
// release's objects (inventory), only what Helm keeps by its own rules may
// stay, the CRD (Helm installs crds/ but never upgrades or deletes them)
// with the APIService the apiserver registers for its group as long as it
// exists, and the namespace the install created (Helm does not delete a
// namespace it created with --create-namespace) with what
// kube-controller-manager puts in every namespace.
func checkUninstalled(t *testing.T, cfg *rest.Config, before []string) {
	t.Helper()
	want := []string{
		"apiservices.apiregistration.k8s.io v1alpha1.sidecarset.dev",
		"configmaps. " + namespace + "/kube-root-ca.crt",
		"customresourcedefinitions.apiextensions.k8s.io " + crdName,
		"namespaces. " + namespace,
		"serviceaccounts. " + namespace + "/default",
	}
	// What the chart installs, and the manager's pods: the check below
	// proves something only if they were there.
	for _, o := range []string{
		"clusterrolebindings.rbac.authorization.k8s.io sidecarset-manager",
		"clusterroles.rbac.authorization.k8s.io sidecarset-manager",
		"deployments.apps " + namespace + "/" + deployment,
		"leases.coordination.k8s.io " + namespace + "/sidecarset-manager.sidecarset.dev",
		"mutatingwebhookconfigurations.admissionregistration.k8s.io " + mutatingWebhooks,
		"poddisruptionbudgets.policy " + namespace + "/" + pdbName,
		"secrets. " + namespace + "/sidecarset-webhook-cert",
		"serviceaccounts. " + namespace + "/sidecarset-manager",
		"services. " + namespace + "/sidecarset-webhook",
		"validatingwebhookconfigurations.admissionregistration.k8s.io " + validatingWebhooks,
	} {
		if !slices.Contains(before, o) {
			t.Errorf("before helm uninstall, no %s among the release's objects:\n  %s", o, strings.Join(before, "\n  "))
		}
	}
	var left []string
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 90*time.Second, true, func(context.Context) (bool, error) {
		left = inventory(t, cfg)
		return slices.Equal(left, want), nil
	})
	if err != nil {
		t.Errorf("after helm uninstall (-want +left):\n%s\nbefore:\n  %s", cmp.Diff(want, left), strings.Join(before, "\n  "))
		return
	}
	t.Logf("after helm uninstall, of %d objects of the release only these stay: %v", len(before), left)
}
