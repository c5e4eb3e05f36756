package inject_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

func TestMatches(t *testing.T) {
	allowSystem := map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "true"}
	dataTeam := map[string]string{"team": "data"}
	set := func() *testutil.SidecarSetBuilder { return testutil.SidecarSet("mesh").Selector(dbLabels) }
	pod := func(ns string) *corev1.Pod { return testutil.Pod(ns, "db-0").Labels(dbLabels).Obj() }
	invalid := &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}

	tests := []struct {
		name string
		set  *v1alpha1.SidecarSet
		pod  *corev1.Pod
		ns   *corev1.Namespace
		want bool
		// wantErr is a prefix: apimachinery words the rest.
		wantErr string
	}{
		{name: "no namespaceSelector: an ordinary namespace", set: set().Obj(), pod: pod("shop"), ns: shop, want: true},
		{name: "no namespaceSelector: kube-system", set: set().Obj(), pod: pod("kube-system"), ns: testutil.Namespace("kube-system", nil)},
		{name: "no namespaceSelector: kube-public", set: set().Obj(), pod: pod("kube-public"), ns: testutil.Namespace("kube-public", nil)},
		{name: "no namespaceSelector: kube-node-lease", set: set().Obj(), pod: pod("kube-node-lease"), ns: testutil.Namespace("kube-node-lease", nil)},
		{name: "no namespaceSelector: the manager's namespace", set: set().Obj(), pod: pod("sidecarset-system"), ns: testutil.Namespace("sidecarset-system", nil)},
		{name: "allowed: kube-system", set: set().Annotations(allowSystem).Obj(), pod: pod("kube-system"), ns: testutil.Namespace("kube-system", nil), want: true},
		{name: "allowed: the manager's namespace", set: set().Annotations(allowSystem).Obj(), pod: pod("sidecarset-system"), ns: testutil.Namespace("sidecarset-system", nil), want: true},
		{name: "allow-system-namespaces must be exactly true", set: set().Annotations(map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "yes"}).Obj(), pod: pod("kube-system"), ns: testutil.Namespace("kube-system", nil)},
		{name: "a namespaceSelector still excludes kube-system", set: set().NamespaceLabelSelector(&metav1.LabelSelector{}).Obj(), pod: pod("kube-system"), ns: testutil.Namespace("kube-system", nil)},
		{name: "namespaceSelector selects the namespace", set: set().NamespaceSelector(dataTeam).Obj(), pod: pod("shop"), ns: shop, want: true},
		{name: "namespaceSelector does not select the namespace", set: set().NamespaceSelector(dataTeam).Obj(), pod: pod("web"), ns: testutil.Namespace("web", nil)},
		{name: "namespaceSelector with unknown namespace labels", set: set().NamespaceSelector(dataTeam).Obj(), pod: pod("shop"), ns: nil},
		{name: "no namespace in the pod: the name comes from ns", set: set().Obj(), pod: pod(""), ns: shop, want: true},
		{name: "no namespace in the pod: kube-system from ns", set: set().Obj(), pod: pod(""), ns: testutil.Namespace("kube-system", nil)},
		{name: "ns wins over the pod's namespace", set: set().Obj(), pod: pod("shop"), ns: testutil.Namespace("kube-system", nil)},
		{name: "an unnamed ns: the name comes from the pod", set: set().Obj(), pod: pod("kube-system"), ns: &corev1.Namespace{}},
		{name: "no namespace name at all: could be kube-system", set: set().Obj(), pod: pod(""), ns: nil},
		{name: "no namespace name at all, system namespaces allowed", set: set().Annotations(allowSystem).Obj(), pod: pod(""), ns: nil, want: true},
		{name: "selector by expression", set: set().LabelSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"db", "cache"}}}}).Obj(), pod: pod("shop"), ns: shop, want: true},
		{name: "selector does not select the pod", set: set().Selector(map[string]string{"app": "web"}).Obj(), pod: pod("shop"), ns: shop},
		{name: "paused and opted out still match", set: set().Paused().Obj(), pod: testutil.Pod("shop", "db-0").Labels(dbLabels).Annotations(map[string]string{v1alpha1.AnnotationInject: "false"}).Obj(), ns: shop, want: true},
		{name: "an invalid selector", set: set().LabelSelector(invalid).Obj(), pod: pod("shop"), ns: shop, wantErr: `SidecarSet "mesh": selector: key: Invalid value: "bad key!"`},
		{name: "an invalid namespaceSelector", set: set().NamespaceLabelSelector(invalid).Obj(), pod: pod("shop"), ns: shop, wantErr: `SidecarSet "mesh": namespaceSelector: key: Invalid value: "bad key!"`},
		{name: "an invalid namespaceSelector is not reached in kube-system", set: set().NamespaceLabelSelector(invalid).Obj(), pod: pod("kube-system"), ns: testutil.Namespace("kube-system", nil)},
		{name: "a nil selector", set: testutil.SidecarSet("mesh").Obj(), pod: pod("shop"), ns: shop, wantErr: `SidecarSet "mesh": selector is empty, which would select every pod`},
		{name: "an empty selector", set: set().LabelSelector(&metav1.LabelSelector{}).Obj(), pod: pod("shop"), ns: shop, wantErr: `SidecarSet "mesh": selector is empty, which would select every pod`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := inject.Matches(tc.set, tc.pod, tc.ns, opts)
			switch {
			case err == nil && tc.wantErr != "":
				t.Errorf("Matches() error = nil, want %q...", tc.wantErr)
			case err != nil && (tc.wantErr == "" || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Errorf("Matches() error = %q, want %q...", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("Matches() = %t, want %t", got, tc.want)
			}
		})
	}
}
