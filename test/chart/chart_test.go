package chart

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// configNamespace is the namespace config/ is generated for; the chart moves
// what lives there to the release namespace.
const configNamespace = "sidecarset-system"

// release is one way of installing the chart and what it must produce.
type release struct {
	name      string
	namespace string
	values    string

	replicas  int32
	injection string
	// allowedKeys is --patch-pod-metadata-allowed-keys, "" when it must
	// not be given.
	allowedKeys    string
	failurePolicy  admissionregistrationv1.FailurePolicyType
	timeoutSeconds int32
	// excluded are the namespaces the pod webhook must skip, in any order.
	excluded        []string
	metricsService  bool
	admissionPolicy bool
	// policyOnly: the policy is rendered without its binding.
	policyOnly bool
	// serviceMonitor is the ServiceMonitor's interval and extra labels;
	// nil when none is rendered.
	serviceMonitor *serviceMonitor
	// logLevel is --zap-log-level, "" for the default, info.
	logLevel string
	// extraArgs end the manager's arguments.
	extraArgs []string
	// podLabels and podAnnotations are the pod template's besides the
	// chart's own labels.
	podLabels, podAnnotations map[string]string
	// spread is how many topologySpreadConstraints the pod has.
	spread int
	// hostNetwork runs the pod in the node's network, the manager on
	// webhookPort ("" for the default, 9443).
	hostNetwork bool
	webhookPort string
	// ruleLabels are the PrometheusRule's extra labels, nil when none is
	// rendered.
	ruleLabels map[string]string
	// dashboard is the dashboard ConfigMap's namespace and annotations,
	// nil when none is rendered.
	dashboard *dashboard
}

type dashboard struct {
	namespace   string
	annotations map[string]string
}

type serviceMonitor struct {
	interval monitoringv1.Duration
	labels   map[string]string
}

var releases = []release{{
	name:           "defaults",
	namespace:      configNamespace,
	replicas:       2,
	injection:      "webhook",
	failurePolicy:  admissionregistrationv1.Fail,
	timeoutSeconds: 5,
	excluded:       []string{"kube-system", "kube-public", "kube-node-lease", configNamespace},
}, {
	name:      "overrides",
	namespace: "platform",
	values: `
replicas: 1
injection: auto
patchPodMetadata:
  allowedKeys: [example.com/, prometheus.io/scrape, "team-*"]
webhook:
  failurePolicy: Ignore
  timeoutSeconds: 10
  excludeNamespaces: [kube-system, kube-public, kube-node-lease, legacy]
metrics:
  service:
    enabled: true
admissionPolicy:
  enabled: true
podLabels: {team: platform, app.kubernetes.io/name: not-the-chart-s}
podAnnotations: {example.com/owner: platform}
logLevel: debug
extraArgs: [--workers=8]
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector: {matchLabels: {app.kubernetes.io/name: sidecarset}}
`,
	logLevel:        "debug",
	extraArgs:       []string{"--workers=8"},
	podLabels:       map[string]string{"team": "platform"},
	podAnnotations:  map[string]string{"example.com/owner": "platform"},
	spread:          1,
	replicas:        1,
	injection:       "auto",
	allowedKeys:     "example.com/,prometheus.io/scrape,team-*",
	failurePolicy:   admissionregistrationv1.Ignore,
	timeoutSeconds:  10,
	excluded:        []string{"kube-system", "kube-public", "kube-node-lease", "legacy", "platform"},
	metricsService:  true,
	admissionPolicy: true,
}, {
	// The release namespace, listed by the user too, is excluded once.
	name:      "release namespace listed",
	namespace: "ops",
	values: `
replicas: 3
webhook:
  excludeNamespaces: [ops]
hostNetwork: true
containerPorts: {webhook: 10443, metrics: 10080, health: 10081}
`,
	hostNetwork:    true,
	webhookPort:    "10443",
	replicas:       3,
	injection:      "webhook",
	failurePolicy:  admissionregistrationv1.Fail,
	timeoutSeconds: 5,
	excluded:       []string{"ops"},
}, {
	// The policy without the chart's binding, for one of the user's own.
	name:      "admission policy only",
	namespace: configNamespace,
	values: `
admissionPolicy:
  enabled: true
  binding: false
`,
	replicas:        2,
	injection:       "webhook",
	failurePolicy:   admissionregistrationv1.Fail,
	timeoutSeconds:  5,
	excluded:        []string{"kube-system", "kube-public", "kube-node-lease", configNamespace},
	admissionPolicy: true,
	policyOnly:      true,
}, {
	// The ServiceMonitor brings the metrics Service it scrapes through.
	name:      "service monitor",
	namespace: "monitoring-test",
	values: `
metrics:
  serviceMonitor:
    enabled: true
    interval: 15s
    labels: {release: prometheus}
`,
	replicas:       2,
	injection:      "webhook",
	failurePolicy:  admissionregistrationv1.Fail,
	timeoutSeconds: 5,
	excluded:       []string{"kube-system", "kube-public", "kube-node-lease", "monitoring-test"},
	metricsService: true,
	serviceMonitor: &serviceMonitor{interval: "15s", labels: map[string]string{"release": "prometheus"}},
}, {
	// Alerts and the dashboard, for the Prometheus Operator and Grafana.
	name:      "alerts and dashboard",
	namespace: "monitoring-test",
	values: `
metrics:
  prometheusRule:
    enabled: true
    labels: {release: prometheus}
  dashboard:
    enabled: true
    namespace: grafana
    annotations: {grafana_folder: Kubernetes}
`,
	replicas:       2,
	injection:      "webhook",
	failurePolicy:  admissionregistrationv1.Fail,
	timeoutSeconds: 5,
	excluded:       []string{"kube-system", "kube-public", "kube-node-lease", "monitoring-test"},
	ruleLabels:     map[string]string{"release": "prometheus"},
	dashboard:      &dashboard{namespace: "grafana", annotations: map[string]string{"grafana_folder": "Kubernetes"}},
}}

func TestChart(t *testing.T) {
	for _, rel := range releases {
		t.Run(rel.name, func(t *testing.T) {
			r := render(t, rel.namespace, rel.values)
			t.Run("objects", func(t *testing.T) { testObjects(t, rel, r) })
			t.Run("webhooks", func(t *testing.T) { testWebhooks(t, rel, r) })
			t.Run("rbac", func(t *testing.T) { testRBAC(t, rel, r) })
			t.Run("rbac own names", func(t *testing.T) { testOwnNames(t, r) })
			t.Run("deployment", func(t *testing.T) { testDeployment(t, rel, r) })
			t.Run("pdb", func(t *testing.T) { testPDB(t, rel, r) })
			t.Run("metrics", func(t *testing.T) { testMetrics(t, rel, r) })
			t.Run("alerts and dashboard", func(t *testing.T) { testAlertsAndDashboard(t, rel, r) })
			t.Run("notes", func(t *testing.T) { testNotes(t, rel, r) })
			t.Run("admission policy", func(t *testing.T) { testAdmissionPolicy(t, rel, r) })
		})
	}
}

// testObjects checks that the chart renders exactly the expected objects.
func testObjects(t *testing.T, rel release, r rendered) {
	ns := rel.namespace
	want := []string{
		key("ServiceAccount", ns, "sidecarset-manager"),
		key("Deployment", ns, "sidecarset-manager"),
		key("Service", ns, "sidecarset-webhook"),
		key("Secret", ns, "sidecarset-webhook-cert"),
		key("Lease", ns, leaderElectionLease),
		key("MutatingWebhookConfiguration", "", "sidecarset-mutating"),
		key("ValidatingWebhookConfiguration", "", "sidecarset-validating"),
	}
	for k, obj := range configRoles(t, rel) {
		switch role := obj.(type) {
		case *rbacv1.ClusterRole:
			want = append(want, key("ClusterRole", "", role.Name), key("ClusterRoleBinding", "", role.Name))
		case *rbacv1.Role:
			want = append(want, key("Role", ns, role.Name), key("RoleBinding", ns, role.Name))
		default:
			t.Fatalf("config/rbac/role.yaml holds %s, which the chart does not bind", k)
		}
	}
	if rel.replicas > 1 {
		want = append(want, key("PodDisruptionBudget", ns, "sidecarset-manager"))
	}
	if rel.metricsService {
		want = append(want, key("Service", ns, "sidecarset-metrics"))
	}
	if rel.serviceMonitor != nil {
		want = append(want, key("ServiceMonitor", ns, "sidecarset-manager"))
	}
	if rel.ruleLabels != nil {
		want = append(want, key("PrometheusRule", ns, "sidecarset"))
	}
	if rel.dashboard != nil {
		want = append(want, key("ConfigMap", rel.dashboard.namespace, "sidecarset-dashboard"))
	}
	if rel.admissionPolicy {
		want = append(want, key("ValidatingAdmissionPolicy", "", admissionPolicy))
		if !rel.policyOnly {
			want = append(want, key("ValidatingAdmissionPolicyBinding", "", admissionPolicy))
		}
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, r.objects.keys()); diff != "" {
		t.Errorf("rendered objects (-want +got):\n%s", diff)
	}
}

// testWebhooks checks that the webhook configurations are config/webhook's,
// with only the templated fields set from the release.
func testWebhooks(t *testing.T, rel release, r rendered) {
	config := readConfig(t, "webhook/manifests.yaml")

	wantMutating := get[*admissionregistrationv1.MutatingWebhookConfiguration](t, config, "MutatingWebhookConfiguration", "", "sidecarset-mutating").DeepCopy()
	for i := range wantMutating.Webhooks {
		w := &wantMutating.Webhooks[i]
		w.ClientConfig.Service.Namespace = rel.namespace
		w.TimeoutSeconds = &rel.timeoutSeconds
		if w.Name == "pods.sidecarset.dev" {
			w.FailurePolicy = &rel.failurePolicy
			*excludedNamespaces(t, w.NamespaceSelector) = rel.excluded
		}
	}
	wantValidating := get[*admissionregistrationv1.ValidatingWebhookConfiguration](t, config, "ValidatingWebhookConfiguration", "", "sidecarset-validating").DeepCopy()
	for i := range wantValidating.Webhooks {
		w := &wantValidating.Webhooks[i]
		w.ClientConfig.Service.Namespace = rel.namespace
		w.TimeoutSeconds = &rel.timeoutSeconds
	}

	gotMutating := get[*admissionregistrationv1.MutatingWebhookConfiguration](t, r.objects, "MutatingWebhookConfiguration", "", "sidecarset-mutating")
	gotValidating := get[*admissionregistrationv1.ValidatingWebhookConfiguration](t, r.objects, "ValidatingWebhookConfiguration", "", "sidecarset-validating")
	// The order of the excluded namespaces (and of any list) carries no
	// meaning; their number does.
	anyOrder := cmpopts.SortSlices(func(a, b string) bool { return a < b })
	if diff := cmp.Diff(wantMutating.Webhooks, gotMutating.Webhooks, anyOrder); diff != "" {
		t.Errorf("mutating webhooks (-config/webhook with the release's values +chart):\n%s", diff)
	}
	if diff := cmp.Diff(wantValidating.Webhooks, gotValidating.Webhooks, anyOrder); diff != "" {
		t.Errorf("validating webhooks (-config/webhook with the release's values +chart):\n%s", diff)
	}

	for _, w := range gotMutating.Webhooks {
		if w.Name == "pods.sidecarset.dev" && !slices.Contains(*excludedNamespaces(t, w.NamespaceSelector), rel.namespace) {
			t.Errorf("the pod webhook does not exclude the release namespace %s: the manager's own pods would wait on the manager", rel.namespace)
		}
	}
}

// excludedNamespaces returns the values of the selector's
// "kubernetes.io/metadata.name NotIn" requirement.
func excludedNamespaces(t *testing.T, sel *metav1.LabelSelector) *[]string {
	t.Helper()
	if sel != nil {
		for i, req := range sel.MatchExpressions {
			if req.Key == corev1.LabelMetadataName && req.Operator == metav1.LabelSelectorOpNotIn {
				return &sel.MatchExpressions[i].Values
			}
		}
	}
	t.Fatalf("namespaceSelector %v has no %s NotIn requirement", sel, corev1.LabelMetadataName)
	return nil
}

// testRBAC checks that the roles grant exactly config/rbac's rules and are
// bound to the manager's ServiceAccount.
func testRBAC(t *testing.T, rel release, r rendered) {
	sa := get[*corev1.ServiceAccount](t, r.objects, "ServiceAccount", rel.namespace, "sidecarset-manager")
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}
	for k, obj := range configRoles(t, rel) {
		switch want := obj.(type) {
		case *rbacv1.ClusterRole:
			got := get[*rbacv1.ClusterRole](t, r.objects, "ClusterRole", "", want.Name)
			if diff := cmp.Diff(want.Rules, got.Rules); diff != "" {
				t.Errorf("ClusterRole %s rules (-config/rbac +chart):\n%s", want.Name, diff)
			}
			binding := get[*rbacv1.ClusterRoleBinding](t, r.objects, "ClusterRoleBinding", "", want.Name)
			checkBinding(t, binding.RoleRef, binding.Subjects, "ClusterRole", want.Name, wantSubjects)
		case *rbacv1.Role:
			if want.Namespace != configNamespace {
				t.Fatalf("config/rbac/role.yaml: Role %s is in %q; the chart moves only %s's", want.Name, want.Namespace, configNamespace)
			}
			got := get[*rbacv1.Role](t, r.objects, "Role", rel.namespace, want.Name)
			if diff := cmp.Diff(want.Rules, got.Rules); diff != "" {
				t.Errorf("Role %s rules (-config/rbac +chart):\n%s", want.Name, diff)
			}
			binding := get[*rbacv1.RoleBinding](t, r.objects, "RoleBinding", rel.namespace, want.Name)
			checkBinding(t, binding.RoleRef, binding.Subjects, "Role", want.Name, wantSubjects)
		default:
			t.Fatalf("config/rbac/role.yaml holds %s, which the chart does not bind", k)
		}
	}
}

// configRoles returns the roles config/rbac declares for rel: the
// manager's, and with injection policy or auto the one that writes the
// SidecarSets' MutatingAdmissionPolicies too.
func configRoles(t *testing.T, rel release) objects {
	t.Helper()
	roles := readConfig(t, "rbac/role.yaml")
	if rel.injection != "webhook" {
		maps.Copy(roles, readConfig(t, "rbac/policy/role.yaml"))
	}
	return roles
}

// leaderElectionLease is the manager's LeaderElectionID
// (internal/manager).
const leaderElectionLease = "sidecarset-manager.sidecarset.dev"

// readVerbs are what the manager may do to any object of a guarded
// resource: the caches (the manager's and the certificate rotation's) list
// and watch, and nothing reads those objects one by one.
var readVerbs = []string{"list", "watch"}

// testOwnNames checks that the manager may change only its own webhook
// configurations, certificate Secret and Lease: any verb but list and watch
// on those resources is granted for the manager's own names only, never
// for every object.
func testOwnNames(t *testing.T, r rendered) {
	_, _, args := manager(t, r)
	own := map[schema.GroupResource][]string{
		{Resource: "secrets"}:                              {args["--cert-secret"]},
		{Group: "coordination.k8s.io", Resource: "leases"}: {leaderElectionLease},
		{Group: admissionregistrationv1.GroupName, Resource: "mutatingwebhookconfigurations"}:   nil,
		{Group: admissionregistrationv1.GroupName, Resource: "validatingwebhookconfigurations"}: nil,
	}
	for _, obj := range r.objects {
		switch w := obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			gr := schema.GroupResource{Group: admissionregistrationv1.GroupName, Resource: "mutatingwebhookconfigurations"}
			own[gr] = append(own[gr], w.Name)
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			gr := schema.GroupResource{Group: admissionregistrationv1.GroupName, Resource: "validatingwebhookconfigurations"}
			own[gr] = append(own[gr], w.Name)
		}
	}
	var rules []rbacv1.PolicyRule
	for _, obj := range r.objects {
		switch role := obj.(type) {
		case *rbacv1.ClusterRole:
			rules = append(rules, role.Rules...)
		case *rbacv1.Role:
			rules = append(rules, role.Rules...)
		}
	}
	for _, rule := range rules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				names, guarded := own[schema.GroupResource{Group: g, Resource: res}]
				if g == "*" || res == "*" {
					t.Errorf("rule %+v: a wildcard reaches the manager's webhook configurations, Secret and Lease", rule)
					continue
				}
				if !guarded {
					continue
				}
				for _, verb := range rule.Verbs {
					switch {
					case slices.Contains(readVerbs, verb) && len(rule.ResourceNames) == 0:
					case verb == "create" && len(rule.ResourceNames) == 0 && res == "leases":
						// A name cannot limit create; the Lease is created on
						// the first election.
					case len(rule.ResourceNames) == 0:
						t.Errorf("%s %s is granted on every object; want resourceNames %v", verb, res, names)
					case verb == "*" || verb == "create" || verb == "list" || verb == "watch":
						t.Errorf("%s %s with resourceNames %v: the names do not limit it", verb, res, rule.ResourceNames)
					default:
						for _, n := range rule.ResourceNames {
							if !slices.Contains(names, n) {
								t.Errorf("%s %s granted on %s, which is not the manager's own (%v)", verb, res, n, names)
							}
						}
					}
				}
			}
		}
	}
}

func checkBinding(t *testing.T, ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind, name string, wantSubjects []rbacv1.Subject) {
	t.Helper()
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	if diff := cmp.Diff(wantRef, ref); diff != "" {
		t.Errorf("%s %s binding's roleRef (-want +got):\n%s", kind, name, diff)
	}
	if diff := cmp.Diff(wantSubjects, subjects); diff != "" {
		t.Errorf("%s %s binding's subjects (-want +got):\n%s", kind, name, diff)
	}
}

// managerArgs returns the manager container's flags by name, "--x" alone
// standing for "--x=true" as the flag package reads it.
func managerArgs(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	args := map[string]string{}
	for _, arg := range c.Args {
		if !strings.HasPrefix(arg, "--") {
			t.Fatalf("manager argument %q is not a --flag", arg)
		}
		name, value, ok := strings.Cut(arg, "=")
		if !ok {
			value = "true"
		}
		if _, dup := args[name]; dup {
			t.Fatalf("manager flag %s given twice in %q", name, c.Args)
		}
		args[name] = value
	}
	return args
}

// manager returns the Deployment, its only container and that container's
// flags.
func manager(t *testing.T, r rendered) (*appsv1.Deployment, corev1.Container, map[string]string) {
	t.Helper()
	d := get[*appsv1.Deployment](t, r.objects, "Deployment", r.namespace, "sidecarset-manager")
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("the manager's pod has %d containers, want 1", n)
	}
	c := d.Spec.Template.Spec.Containers[0]
	return d, c, managerArgs(t, c)
}

// containerPort resolves a probe's or Service's named or numbered port
// against the container's ports.
func containerPort(t *testing.T, c corev1.Container, port intstr.IntOrString) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return p.ContainerPort
		}
	}
	t.Fatalf("port %s is not among the container's ports %v", port.String(), c.Ports)
	return 0
}

// selects fails unless sel selects the manager's pods.
func selects(t *testing.T, what string, sel *metav1.LabelSelector, pod map[string]string) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if s.Empty() || !s.Matches(labels.Set(pod)) {
		t.Errorf("%s %q does not select the manager's pods %v", what, s, pod)
	}
}

func testDeployment(t *testing.T, rel release, r rendered) {
	d, c, args := manager(t, r)
	podLabels := d.Spec.Template.Labels
	spec := d.Spec.Template.Spec

	switch got := d.Spec.Replicas; {
	case got == nil:
		t.Errorf("replicas unset, want %d", rel.replicas)
	case *got != rel.replicas:
		t.Errorf("replicas = %d, want %d", *got, rel.replicas)
	}
	selects(t, "the Deployment's selector", d.Spec.Selector, podLabels)
	if want := "ghcr.io/sidecarset/sidecarset-manager:v0.1.0"; c.Image != want {
		t.Errorf("image = %q, want %q (the chart's appVersion)", c.Image, want)
	}
	sa := get[*corev1.ServiceAccount](t, r.objects, "ServiceAccount", r.namespace, spec.ServiceAccountName)
	if sa.Name != "sidecarset-manager" {
		t.Errorf("the manager runs as %s, not the ServiceAccount the roles are bound to", sa.Name)
	}

	// Leader election: on iff more than one replica.
	// Whatever the replicas: a rolling update of one replica runs two
	// managers at once.
	if got := args["--leader-elect"]; got != "true" {
		t.Errorf("--leader-elect = %q with %d replicas, want true", got, rel.replicas)
	}

	if got := args["--injection"]; got != rel.injection {
		t.Errorf("--injection = %q, want %q", got, rel.injection)
	}
	if got, want := args["--zap-log-level"], orDefault(rel.logLevel, "info"); got != want {
		t.Errorf("--zap-log-level = %q, want %q", got, want)
	}
	if got := c.Args[len(c.Args)-len(rel.extraArgs):]; !slices.Equal(got, rel.extraArgs) {
		t.Errorf("the arguments end with %q, want extraArgs %q", got, rel.extraArgs)
	}
	for k, v := range rel.podLabels {
		if podLabels[k] != v {
			t.Errorf("pod label %s = %q, want %q from podLabels", k, podLabels[k], v)
		}
	}
	if podLabels["app.kubernetes.io/name"] != "sidecarset" {
		t.Errorf("pod label app.kubernetes.io/name = %q: podLabels overrode a label that selects the pods", podLabels["app.kubernetes.io/name"])
	}
	if diff := cmp.Diff(rel.podAnnotations, d.Spec.Template.Annotations, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("pod annotations (-podAnnotations +chart):\n%s", diff)
	}
	if got, want := args["--webhook-port"], orDefault(rel.webhookPort, "9443"); got != want {
		t.Errorf("--webhook-port = %q, want %q", got, want)
	}
	if spec.HostNetwork != rel.hostNetwork {
		t.Errorf("hostNetwork = %t, want %t", spec.HostNetwork, rel.hostNetwork)
	}
	if rel.hostNetwork && spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("dnsPolicy %q with hostNetwork: the manager would not resolve cluster names", spec.DNSPolicy)
	}
	if got := len(spec.TopologySpreadConstraints); got != rel.spread {
		t.Errorf("%d topologySpreadConstraints, want %d", got, rel.spread)
	}
	// No key is allowed unless the values list some.
	if got, ok := args["--patch-pod-metadata-allowed-keys"]; got != rel.allowedKeys || ok != (rel.allowedKeys != "") {
		t.Errorf("--patch-pod-metadata-allowed-keys = %q (given: %t), want %q", got, ok, rel.allowedKeys)
	}

	// The manager's namespace comes from the downward API, so that it
	// follows the release namespace.
	if v, ok := args["--namespace"]; ok {
		t.Errorf("--namespace=%s overrides $POD_NAMESPACE", v)
	}
	wantEnv := []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
	}}}
	if diff := cmp.Diff(wantEnv, c.Env, cmpopts.IgnoreFields(corev1.ObjectFieldSelector{}, "APIVersion")); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}

	// Certificates: rotation on, into a Secret of the release that is
	// mounted read-only at --cert-dir.
	if args["--cert-rotation"] != "true" {
		t.Errorf("--cert-rotation is not set in %q", c.Args)
	}
	certDir, secretName := args["--cert-dir"], args["--cert-secret"]
	if certDir == "" || secretName == "" {
		t.Fatalf("--cert-dir %q and --cert-secret %q must both be given", certDir, secretName)
	}
	secret := get[*corev1.Secret](t, r.objects, "Secret", r.namespace, secretName)
	if len(secret.Data)+len(secret.StringData) != 0 {
		t.Errorf("Secret %s ships data; the manager's rotation must own it", secretName)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath != certDir {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("the certificate volume %s is mounted writable", m.Name)
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == secretName {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("Secret %s is not mounted at --cert-dir %s: mounts %v, volumes %v", secretName, certDir, c.VolumeMounts, spec.Volumes)
	}

	// The webhooks reach the manager: configurations → Service 443 → the
	// container's --webhook-port.
	svcName := args["--webhook-service"]
	svc := get[*corev1.Service](t, r.objects, "Service", r.namespace, svcName)
	selects(t, "Service "+svcName+"'s selector", &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, podLabels)
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 443 })
	if i < 0 {
		t.Fatalf("Service %s has no port 443: %v", svcName, svc.Spec.Ports)
	}
	if got, want := strconv.Itoa(int(containerPort(t, c, svc.Spec.Ports[i].TargetPort))), args["--webhook-port"]; got != want {
		t.Errorf("Service %s sends 443 to %s, the manager serves webhooks on --webhook-port=%s", svcName, got, want)
	}
	mutating := get[*admissionregistrationv1.MutatingWebhookConfiguration](t, r.objects, "MutatingWebhookConfiguration", "", "sidecarset-mutating")
	validating := get[*admissionregistrationv1.ValidatingWebhookConfiguration](t, r.objects, "ValidatingWebhookConfiguration", "", "sidecarset-validating")
	var refs []*admissionregistrationv1.ServiceReference
	for _, w := range mutating.Webhooks {
		refs = append(refs, w.ClientConfig.Service)
	}
	for _, w := range validating.Webhooks {
		refs = append(refs, w.ClientConfig.Service)
	}
	for _, ref := range refs {
		if ref == nil || ref.Name != svcName || ref.Namespace != r.namespace {
			t.Errorf("a webhook calls %v, not the release's Service %s/%s", ref, r.namespace, svcName)
		}
	}

	// Shutdown: the drain, then the graceful-shutdown timeout, then the
	// Lease given up and the process gone, all before the kubelet's
	// SIGKILL.
	checkShutdown(t, spec, args)

	// Probes on the health port.
	probes := map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe}
	for path, p := range probes {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
			t.Errorf("probe for %s: %+v", path, p)
			continue
		}
		if got, want := ":"+strconv.Itoa(int(containerPort(t, c, p.HTTPGet.Port))), args["--health-probe-bind-address"]; got != want {
			t.Errorf("probe %s on %s, the manager serves it on --health-probe-bind-address=%s", path, got, want)
		}
	}

	// Security.
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod securityContext %+v: want runAsNonRoot", psc)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want seccompProfile RuntimeDefault", psc)
	}
	wantSC := &corev1.SecurityContext{
		AllowPrivilegeEscalation: new(false),
		ReadOnlyRootFilesystem:   new(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	if diff := cmp.Diff(wantSC, c.SecurityContext); diff != "" {
		t.Errorf("container securityContext (-want +got):\n%s", diff)
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[res]; !ok {
			t.Errorf("no %s request: %v", res, c.Resources.Requests)
		}
	}

	// Replicas preferably on different nodes.
	spread := false
	if a := spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if term.PodAffinityTerm.TopologyKey == corev1.LabelHostname {
				selects(t, "the anti-affinity's selector", term.PodAffinityTerm.LabelSelector, podLabels)
				spread = true
			}
		}
	}
	if !spread {
		t.Errorf("no preferred pod anti-affinity across %s: %+v", corev1.LabelHostname, spec.Affinity)
	}
}

// Bounds of the manager's shutdown in the chart.
const (
	// minDrain covers an endpoint's way out of the Service to kube-proxy.
	minDrain = 2 * time.Second
	// shutdownMargin is left of the grace period after the drain and the
	// graceful-shutdown timeout: the Lease's release (bounded by its renew
	// deadline) and the process's exit.
	shutdownMargin = 10 * time.Second
)

// checkShutdown checks that the manager drains long enough, and that the
// drain and the graceful-shutdown timeout leave a margin in the pod's grace
// period.
func checkShutdown(t *testing.T, spec corev1.PodSpec, args map[string]string) {
	t.Helper()
	durations := map[string]time.Duration{}
	for _, flag := range []string{"--shutdown-drain", "--graceful-shutdown-timeout"} {
		v, ok := args[flag]
		if !ok {
			t.Errorf("%s is not given: the manager's default would decide", flag)
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Errorf("%s=%s: %v", flag, v, err)
		}
		durations[flag] = d
	}
	drain, timeout := durations["--shutdown-drain"], durations["--graceful-shutdown-timeout"]
	if drain < minDrain {
		t.Errorf("--shutdown-drain=%s, want at least %s for the endpoint to leave kube-proxy", drain, minDrain)
	}
	if spec.TerminationGracePeriodSeconds == nil {
		t.Fatalf("terminationGracePeriodSeconds unset: the API's default, not the chart, would bound the shutdown")
	}
	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	if drain+timeout+shutdownMargin > grace {
		t.Errorf("--shutdown-drain=%s + --graceful-shutdown-timeout=%s + %s margin > terminationGracePeriodSeconds %s: SIGKILL could cut the shutdown short", drain, timeout, shutdownMargin, grace)
	}
}

func testPDB(t *testing.T, rel release, r rendered) {
	k := key("PodDisruptionBudget", r.namespace, "sidecarset-manager")
	if rel.replicas <= 1 {
		if _, ok := r.objects[k]; ok {
			t.Errorf("%s rendered with %d replica: it would block every drain", k, rel.replicas)
		}
		return
	}
	d, _, _ := manager(t, r)
	pdb := get[*policyv1.PodDisruptionBudget](t, r.objects, "PodDisruptionBudget", r.namespace, "sidecarset-manager")
	if want := intstr.FromInt32(1); pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != want {
		t.Errorf("minAvailable = %v, want %v", pdb.Spec.MinAvailable, want)
	}
	selects(t, "the PodDisruptionBudget's selector", pdb.Spec.Selector, d.Spec.Template.Labels)
}

// testMetrics checks that the optional metrics Service reaches the manager's
// --metrics-bind-address.
func testMetrics(t *testing.T, rel release, r rendered) {
	if !rel.metricsService {
		return
	}
	d, c, args := manager(t, r)
	svc := get[*corev1.Service](t, r.objects, "Service", r.namespace, "sidecarset-metrics")
	selects(t, "Service sidecarset-metrics's selector", &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, d.Spec.Template.Labels)
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service sidecarset-metrics ports %v, want one", svc.Spec.Ports)
	}
	if got, want := ":"+strconv.Itoa(int(containerPort(t, c, svc.Spec.Ports[0].TargetPort))), args["--metrics-bind-address"]; got != want {
		t.Errorf("Service sidecarset-metrics sends to %s, the manager serves metrics on --metrics-bind-address=%s", got, want)
	}
	if rel.serviceMonitor != nil {
		testServiceMonitor(t, rel, r, svc)
	}
}

// testAlertsAndDashboard checks that the PrometheusRule holds the alerts
// of files/alerts.yaml as they are (Prometheus, not Helm, fills in their
// {{ $labels }}), and the ConfigMap the dashboard of dashboards/ as it is,
// with the labels Grafana's sidecar loads it by.
func testAlertsAndDashboard(t *testing.T, rel release, r rendered) {
	if rel.ruleLabels != nil {
		rule := get[*monitoringv1.PrometheusRule](t, r.objects, "PrometheusRule", r.namespace, "sidecarset")
		for k, v := range rel.ruleLabels {
			if rule.Labels[k] != v {
				t.Errorf("PrometheusRule label %s = %q, want %q (metrics.prometheusRule.labels)", k, rule.Labels[k], v)
			}
		}
		data, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var want []monitoringv1.Rule
		if err := yaml.UnmarshalStrict(data, &want); err != nil {
			t.Fatalf("files/alerts.yaml: %v", err)
		}
		if len(rule.Spec.Groups) != 1 {
			t.Fatalf("PrometheusRule groups %+v, want one", rule.Spec.Groups)
		}
		if diff := cmp.Diff(want, rule.Spec.Groups[0].Rules); diff != "" {
			t.Errorf("PrometheusRule rules, against files/alerts.yaml (-want +got):\n%s", diff)
		}
		for _, a := range rule.Spec.Groups[0].Rules {
			if !strings.Contains(a.Annotations["summary"], "{{ $labels.") && strings.Contains(a.Expr.String(), "by (sidecarset)") {
				t.Errorf("alert %s: its summary does not name the SidecarSet", a.Alert)
			}
		}
	}
	if d := rel.dashboard; d != nil {
		cm := get[*corev1.ConfigMap](t, r.objects, "ConfigMap", d.namespace, "sidecarset-dashboard")
		want, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "sidecarset.json"))
		if err != nil {
			t.Fatal(err)
		}
		if got := cm.Data["sidecarset.json"]; got != strings.TrimRight(string(want), "\n") {
			t.Errorf("ConfigMap sidecarset-dashboard holds %d bytes of sidecarset.json, not dashboards/sidecarset.json", len(got))
		}
		if cm.Labels["grafana_dashboard"] != "1" {
			t.Errorf("ConfigMap sidecarset-dashboard labels %v, want grafana_dashboard: \"1\" (the default)", cm.Labels)
		}
		for k, v := range d.annotations {
			if cm.Annotations[k] != v {
				t.Errorf("ConfigMap annotation %s = %q, want %q", k, cm.Annotations[k], v)
			}
		}
	}
}

// testServiceMonitor checks that the ServiceMonitor scrapes the manager's
// replicas through the metrics Service, and through it alone, over plain
// HTTP as the manager serves them.
func testServiceMonitor(t *testing.T, rel release, r rendered, metrics *corev1.Service) {
	sm := get[*monitoringv1.ServiceMonitor](t, r.objects, "ServiceMonitor", r.namespace, "sidecarset-manager")
	for k, v := range rel.serviceMonitor.labels {
		if sm.Labels[k] != v {
			t.Errorf("ServiceMonitor label %s = %q, want %q (metrics.serviceMonitor.labels)", k, sm.Labels[k], v)
		}
	}
	if got := sm.Spec.NamespaceSelector.MatchNames; !slices.Equal(got, []string{r.namespace}) {
		t.Errorf("ServiceMonitor namespaceSelector.matchNames = %v, want [%s]", got, r.namespace)
	}
	selects(t, "the ServiceMonitor's selector", &sm.Spec.Selector, metrics.Labels)
	webhook := get[*corev1.Service](t, r.objects, "Service", r.namespace, "sidecarset-webhook")
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Matches(labels.Set(webhook.Labels)) {
		t.Error("the ServiceMonitor's selector matches the webhook Service too: it would scrape port 443")
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %+v, want one", sm.Spec.Endpoints)
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != metrics.Spec.Ports[0].Name {
		t.Errorf("ServiceMonitor endpoint port %q, want the metrics Service's port %q", ep.Port, metrics.Spec.Ports[0].Name)
	}
	if ep.Path != "/metrics" || ep.Scheme == nil || !strings.EqualFold(string(*ep.Scheme), string(monitoringv1.SchemeHTTP)) {
		t.Errorf("ServiceMonitor endpoint path %q scheme %v, want /metrics over http", ep.Path, ep.Scheme)
	}
	if ep.Interval != rel.serviceMonitor.interval {
		t.Errorf("ServiceMonitor endpoint interval %q, want %q", ep.Interval, rel.serviceMonitor.interval)
	}
}

// admissionPolicy names the optional ValidatingAdmissionPolicy and its
// binding.
const admissionPolicy = "sidecarset-restrict-sidecars"

// testAdmissionPolicy checks that the optional policy and binding are
// config/policy's, which test/security applies to a real apiserver, with
// only the chart's labels added; with admissionPolicy.binding=false, the
// policy alone (testObjects checks that no binding is rendered).
func testAdmissionPolicy(t *testing.T, rel release, r rendered) {
	if !rel.admissionPolicy {
		return
	}
	config := readConfig(t, "policy/restrict-sidecars.yaml")
	wantPolicy := get[*admissionregistrationv1.ValidatingAdmissionPolicy](t, config, "ValidatingAdmissionPolicy", "", admissionPolicy)
	policy := get[*admissionregistrationv1.ValidatingAdmissionPolicy](t, r.objects, "ValidatingAdmissionPolicy", "", admissionPolicy)
	if diff := cmp.Diff(wantPolicy.Spec, policy.Spec); diff != "" {
		t.Errorf("ValidatingAdmissionPolicy spec differs from config/policy (-want +got):\n%s", diff)
	}
	labelled := []map[string]string{policy.Labels}
	if !rel.policyOnly {
		wantBinding := get[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, config, "ValidatingAdmissionPolicyBinding", "", admissionPolicy)
		binding := get[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, r.objects, "ValidatingAdmissionPolicyBinding", "", admissionPolicy)
		if diff := cmp.Diff(wantBinding.Spec, binding.Spec); diff != "" {
			t.Errorf("ValidatingAdmissionPolicyBinding spec differs from config/policy (-want +got):\n%s", diff)
		}
		labelled = append(labelled, binding.Labels)
	}
	for _, labels := range labelled {
		if labels["app.kubernetes.io/managed-by"] == "" {
			t.Errorf("labels %v lack the chart's", labels)
		}
	}
}

func testNotes(t *testing.T, rel release, r rendered) {
	want := []string{"kubectl sidecarset preflight --manager-namespace " + rel.namespace}
	if rel.failurePolicy == admissionregistrationv1.Ignore {
		want = append(want, "unmanagedPods", "kubectl sidecarset restart-unmanaged")
	}
	for _, w := range want {
		if !strings.Contains(r.notes, w) {
			t.Errorf("NOTES.txt does not say %q:\n%s", w, r.notes)
		}
	}
}

// TestCRDs checks that the chart's crds/ holds exactly config/crd's files.
func TestCRDs(t *testing.T) {
	want := map[string]string{}
	paths, err := filepath.Glob(filepath.Join(configDir, "crd", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want[filepath.Base(p)] = string(data)
	}
	got := map[string]string{}
	for _, crd := range loadChart(t).CRDObjects() {
		got[filepath.Base(crd.Name)] = string(crd.File.Data)
		objs := decodeAll(t, string(crd.File.Data))
		for k, obj := range objs {
			if _, ok := obj.(*apiextensionsv1.CustomResourceDefinition); !ok {
				t.Errorf("%s holds %s", crd.Name, k)
			}
		}
	}
	if len(want) == 0 {
		t.Fatalf("no CRD under %s/crd", configDir)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chart crds/ (-config/crd +chart; run make manifests):\n%s", diff)
	}
}

// TestLint runs helm lint on every release's values; warnings fail too.
func TestLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range releases {
		vals, err := chartutil.ReadValues([]byte(rel.values))
		if err != nil {
			t.Fatal(err)
		}
		linter := lint.AllWithKubeVersion(chartDir, vals, rel.namespace, kv)
		for _, m := range linter.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: %s", rel.name, m)
			}
		}
	}
}

// TestManagerAcceptsArgs runs the manager built from this tree with each
// release's arguments and --help: the flag package exits 0 there only when
// every argument before it is a known flag with a valid value.
func TestManagerAcceptsArgs(t *testing.T) {
	managerBin := filepath.Join(t.TempDir(), "sidecarset-manager")
	build := exec.Command("go", "build", "-o", managerBin, "./cmd/sidecarset-manager")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the manager: %v\n%s", err, out)
	}
	for _, rel := range releases {
		_, c, _ := manager(t, render(t, rel.namespace, rel.values))
		cmd := exec.Command(managerBin, append(slices.Clone(c.Args), "--help")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: sidecarset-manager %q: %v\n%s", rel.name, c.Args, err, out)
		}
	}
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
