// Package security_test checks, on a real kube-apiserver, the manifests
// docs/security.md offers: the example RBAC roles for who may create
// SidecarSets, and the optional ValidatingAdmissionPolicy that refuses
// privileged and host-access sidecars.
package security_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/config"
	"github.com/sidecarset/sidecarset/examples"
	"github.com/sidecarset/sidecarset/internal/cli"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	// kube-controller-manager type-checks admission policies.
	env, err = testenv.Start(testenv.Options{ControllerManager: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
		}
	}()
	return m.Run()
}

// apply creates every object of a multi-document manifest, decoded
// strictly: a misspelt field in an example fails here.
func apply(t *testing.T, manifest []byte) []client.Object {
	t.Helper()
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var objs []client.Object
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode:\n%s\n%v", doc, err)
		}
		o, ok := obj.(client.Object)
		if !ok {
			t.Fatalf("%s is not an object", gvk)
		}
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatalf("create %s %s: %v", gvk.Kind, o.GetName(), err)
		}
		objs = append(objs, o)
	}
	if len(objs) == 0 {
		t.Fatal("the manifest holds no object")
	}
	t.Cleanup(func() {
		for _, o := range objs {
			if err := env.Client.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", o.GetName(), err)
			}
		}
	})
	return objs
}

// TestExampleRBAC: with examples/rbac applied, a member of platform-team may
// create and change SidecarSets, a member of developers may only read them,
// and anyone else may do neither; no one is given the status, which is the
// manager's. SubjectAccessReviews ask the apiserver's authorizer, then the
// users themselves try.
func TestExampleRBAC(t *testing.T) {
	// The example's Role lives in the manager's namespace.
	managerNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cli.DefaultManagerNamespace}}
	if err := env.Client.Create(t.Context(), managerNS); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	apply(t, examples.RBAC)
	type user struct {
		name   string
		groups []string
	}
	author := user{"alice", []string{"platform-team"}}
	viewer := user{"bob", []string{"developers"}}
	other := user{"carol", []string{"qa"}}
	for _, tc := range []struct {
		user        user
		verb        string
		subresource string
		want        bool
	}{
		{author, "create", "", true},
		{author, "update", "", true},
		{author, "patch", "", true},
		{author, "delete", "", true},
		{author, "watch", "", true},
		{author, "update", "status", false},
		{author, "patch", "status", false},
		{viewer, "get", "", true},
		{viewer, "list", "", true},
		{viewer, "watch", "", true},
		{viewer, "create", "", false},
		{viewer, "patch", "", false},
		{viewer, "delete", "", false},
		{viewer, "update", "status", false},
		{other, "get", "", false},
		{other, "create", "", false},
	} {
		name := fmt.Sprintf("%s %s sidecarsets/%s", tc.user.name, tc.verb, tc.subresource)
		t.Run(name, func(t *testing.T) {
			// The example's bindings reach the authorizer's cache a moment
			// after they are created.
			var got *authorizationv1.SubjectAccessReview
			err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				got = &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   tc.user.name,
					Groups: append([]string{"system:authenticated"}, tc.user.groups...),
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Group: v1alpha1.GroupVersion.Group, Resource: "sidecarsets", Subresource: tc.subresource, Verb: tc.verb, Name: "any",
					},
				}}
				if err := env.Client.Create(ctx, got); err != nil {
					return false, err
				}
				return got.Status.Allowed == tc.want, nil
			})
			if err != nil {
				t.Errorf("allowed = %v (%s), want %v", got.Status.Allowed, got.Status.Reason, tc.want)
			}
		})
	}

	set := plainSet("rbac")
	asAuthor := userClient(t, author.name, author.groups...)
	asViewer := userClient(t, viewer.name, viewer.groups...)
	err := asViewer.Create(t.Context(), set.DeepCopy())
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a developer creates a SidecarSet: %v, want Forbidden", err)
	}
	t.Logf("a developer creates a SidecarSet: %v", err)
	if err := asAuthor.Create(t.Context(), set); err != nil {
		t.Fatalf("platform-team creates a SidecarSet: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	if err := asViewer.Get(t.Context(), client.ObjectKeyFromObject(set), &v1alpha1.SidecarSet{}); err != nil {
		t.Errorf("a developer reads the SidecarSet: %v", err)
	}
	pause := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"updateStrategy":{"paused":true}}}`))
	if err := asViewer.Patch(t.Context(), set.DeepCopy(), pause); !apierrors.IsForbidden(err) {
		t.Errorf("a developer pauses the rollout: %v, want Forbidden", err)
	}
	if err := asAuthor.Patch(t.Context(), set.DeepCopy(), pause); err != nil {
		t.Errorf("platform-team pauses the rollout: %v", err)
	}

	t.Run("the author runs every rollout verb", func(t *testing.T) {
		rolloutVerbs(t, asAuthor, asViewer, set.Name)
	})
}

// rolloutVerbs runs each `kubectl sidecarset rollout` verb as author, on
// a SidecarSet at its first image, then moved to a second. The test plays
// the manager's part: it keeps the revisions the manager would, writes
// the status `rollout run` waits for, and creates a pod carrying the
// managed label, so that undo reads pods and their namespace too.
func rolloutVerbs(t *testing.T, author, viewer client.Client, name string) {
	ctx := t.Context()
	set := &v1alpha1.SidecarSet{}
	if err := author.Get(ctx, client.ObjectKey{Name: name}, set); err != nil {
		t.Fatal(err)
	}
	first := set.Spec.DeepCopy()
	set.Spec.Containers[0].Image = "exporter:v2"
	if err := author.Update(ctx, set); err != nil {
		t.Fatalf("platform-team changes the image: %v", err)
	}
	for i, spec := range []*v1alpha1.SidecarSetSpec{first, &set.Spec} {
		n := int64(i + 1)
		cr := &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{
				Name: revision.Name(name, spec), Namespace: cli.DefaultManagerNamespace,
				Labels:      map[string]string{v1alpha1.LabelSidecarSet: name},
				Annotations: map[string]string{v1alpha1.AnnotationFirstRevision: strconv.FormatInt(n, 10)},
			},
			Data:     runtime.RawExtension{Raw: revision.Data(spec)},
			Revision: n,
		}
		if err := env.Client.Create(ctx, cr); err != nil {
			t.Fatalf("create revision %d: %v", n, err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cr) })
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-db", Namespace: "default", Labels: map[string]string{v1alpha1.LabelManaged: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:v1"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pod) })

	// The manager's part in `rollout run`: a status about the current
	// generation, Complete.
	statusCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = wait.PollUntilContextCancel(statusCtx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			reportComplete(ctx, name)
			return false, nil
		})
	}()

	var out bytes.Buffer
	for _, verb := range []struct {
		name string
		run  func(client.Client) error
	}{
		{"resume", func(c client.Client) error { return cli.SetPaused(ctx, c, &out, name, false) }},
		{"pause", func(c client.Client) error { return cli.SetPaused(ctx, c, &out, name, true) }},
		{"promote", func(c client.Client) error { return cli.Promote(ctx, c, &out, name, intstr.FromString("50%")) }},
		{"resume again", func(c client.Client) error { return cli.SetPaused(ctx, c, &out, name, false) }},
		{"run", func(c client.Client) error {
			return cli.Run(ctx, c, &out, cli.RunOptions{
				Name: name, Steps: []intstr.IntOrString{intstr.FromInt32(0)},
				WaitReady: 30 * time.Second, NotReadyTimeout: 30 * time.Second, Interval: 50 * time.Millisecond,
			})
		}},
		{"undo", func(c client.Client) error {
			return cli.Undo(ctx, c, &out, cli.UndoOptions{Name: name, ManagerNamespace: cli.DefaultManagerNamespace})
		}},
	} {
		if err := verb.run(viewer); !apierrors.IsForbidden(err) {
			t.Errorf("a developer runs rollout %s: %v, want Forbidden", verb.name, err)
		}
		if err := verb.run(author); err != nil {
			t.Errorf("platform-team runs rollout %s: %v", verb.name, err)
		}
	}
	t.Logf("platform-team's rollout verbs:\n%s", out.String())
	got := &v1alpha1.SidecarSet{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	if img := got.Spec.Containers[0].Image; img != "exporter:v1" {
		t.Errorf("after undo the image is %s, want exporter:v1", img)
	}
}

// reportComplete writes, as the controller would, a status about the
// set's current generation with Complete=True; it does nothing when the
// status is already about it, and a failed read or write is left to the
// caller's next try.
func reportComplete(ctx context.Context, name string) {
	s := &v1alpha1.SidecarSet{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, s); err != nil || s.Status.ObservedGeneration == s.Generation {
		return
	}
	s.Status.ObservedGeneration = s.Generation
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: "Updated", Message: "every pod is updated",
		ObservedGeneration: s.Generation,
	})
	_ = env.Client.Status().Update(ctx, s)
}

// withSecurity sets the exporter sidecar's securityContext.
func withSecurity(sc corev1.SecurityContext) func(*v1alpha1.SidecarSet) {
	return func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].SecurityContext = &sc }
}

func userClient(t *testing.T, name string, groups ...string) client.Client {
	t.Helper()
	cfg, err := env.AddUser(name, groups...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func plainSet(name string) *v1alpha1.SidecarSet {
	return &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{
				Name: "exporter", Image: "exporter:v1",
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9104}},
			}}},
		},
	}
}

// TestAdmissionPolicy applies config/policy, which the chart renders with
// admissionPolicy.enabled=true (test/chart checks that they are the same),
// and creates SidecarSets against it: each sidecar setting what Pod
// Security's baseline forbids, and each hostPath volume, is refused with a
// message naming the field's full path; a plain one, and ones setting the
// values baseline allows (NET_BIND_SERVICE added, RuntimeDefault profiles,
// procMount Default, a container SELinux type), are accepted; an update
// that makes an accepted set privileged is refused, and so is a dry-run
// re-write of a privileged set created while the binding was away.
func TestAdmissionPolicy(t *testing.T) {
	objs := apply(t, config.AdmissionPolicy)
	policy, ok := objs[0].(*admissionregistrationv1.ValidatingAdmissionPolicy)
	if !ok {
		t.Fatalf("config/policy starts with a %T, want the ValidatingAdmissionPolicy", objs[0])
	}
	// kube-controller-manager's policy status controller type-checks every
	// expression against the CRD's schema and writes status.typeChecking:
	// a field the schema lacks would make an expression always fail.
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return false, err
		}
		return policy.Status.ObservedGeneration == policy.Generation && policy.Status.TypeChecking != nil, nil
	})
	if err != nil {
		t.Fatalf("the policy was never type-checked: %v", err)
	}
	for _, w := range policy.Status.TypeChecking.ExpressionWarnings {
		t.Errorf("type check of %s: %s", w.FieldRef, w.Warning)
	}

	const denied = `ValidatingAdmissionPolicy 'sidecarset-restrict-sidecars' with binding 'sidecarset-restrict-sidecars' denied request: `
	privileged := &corev1.SecurityContext{Privileged: ptr.To(true)}
	for _, tc := range []struct {
		name   string
		change func(*v1alpha1.SidecarSet)
		// want is the refusal's message after denied; empty: accepted.
		want string
	}{
		{"privileged", func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].SecurityContext = privileged },
			"privileged sidecars are not allowed: spec.containers[name=exporter].securityContext.privileged"},
		// Once a refusal shows the policy enforced.
		{"plain", func(*v1alpha1.SidecarSet) {}, ""},
		{"privileged native sidecar", func(s *v1alpha1.SidecarSet) {
			s.Spec.InitContainers = []v1alpha1.SidecarContainer{{Container: corev1.Container{
				Name: "proxy", Image: "proxy:v1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), SecurityContext: privileged,
			}}}
		}, "privileged sidecars are not allowed: spec.initContainers[name=proxy].securityContext.privileged"},
		{"capability added", withSecurity(corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}),
			"sidecars may not add Linux capabilities other than NET_BIND_SERVICE: spec.containers[name=exporter].securityContext.capabilities.add"},
		{"NET_BIND_SERVICE added", withSecurity(corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}}), ""},
		{"host port", func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Ports[0].HostPort = 9104 },
			"sidecars may not use host ports: spec.containers[name=exporter].ports[containerPort=9104].hostPort"},
		{"seccomp Unconfined", withSecurity(corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}),
			"sidecars may not run without a seccomp profile (type Unconfined): spec.containers[name=exporter].securityContext.seccompProfile.type"},
		{"seccomp RuntimeDefault", withSecurity(corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}), ""},
		{"AppArmor Unconfined", withSecurity(corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}),
			"sidecars may not run without an AppArmor profile (type Unconfined): spec.containers[name=exporter].securityContext.appArmorProfile.type"},
		{"AppArmor RuntimeDefault", withSecurity(corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}), ""},
		{"procMount Unmasked", withSecurity(corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}),
			"sidecars may not unmask /proc (procMount other than Default): spec.containers[name=exporter].securityContext.procMount"},
		{"procMount Default", withSecurity(corev1.SecurityContext{ProcMount: ptr.To(corev1.DefaultProcMount)}), ""},
		{"SELinux type spc_t", withSecurity(corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}),
			"sidecars may set only the SELinux types container_t, container_init_t, container_kvm_t and container_engine_t: spec.containers[name=exporter].securityContext.seLinuxOptions.type"},
		{"SELinux type container_init_t and a level", withSecurity(corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "container_init_t", Level: "s0:c1,c2"}}), ""},
		{"SELinux user", withSecurity(corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{User: "system_u"}}),
			"sidecars may not set an SELinux user: spec.containers[name=exporter].securityContext.seLinuxOptions.user"},
		{"SELinux role", withSecurity(corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Role: "system_r"}}),
			"sidecars may not set an SELinux role: spec.containers[name=exporter].securityContext.seLinuxOptions.role"},
		{"Windows host process", withSecurity(corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}}),
			"sidecars may not run as Windows host processes: spec.containers[name=exporter].securityContext.windowsOptions.hostProcess"},
		{"hostPath volume", func(s *v1alpha1.SidecarSet) {
			s.Spec.Volumes = []corev1.Volume{{Name: "host-logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}}
			s.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host-logs", MountPath: "/host/logs"}}
		}, "SidecarSets may not add hostPath volumes: spec.volumes[name=host-logs].hostPath"},
		{"emptyDir volume", func(s *v1alpha1.SidecarSet) {
			s.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := plainSet("policy-" + strings.NewReplacer(" ", "-", "_", "-", "/", "-").Replace(strings.ToLower(tc.name)))
			tc.change(set)
			// The policy reaches the apiserver's admission a moment after
			// it is created: until a refusal comes, retry with dry runs.
			var err error
			if tc.want != "" {
				_ = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
					err = env.Client.Create(ctx, set.DeepCopy(), client.DryRunAll)
					return err != nil, nil
				})
			}
			err = env.Client.Create(t.Context(), set)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("create: %v, want accepted", err)
				}
				t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
				return
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), denied+tc.want) {
				t.Fatalf("create: %v\nwant Forbidden with %q", err, denied+tc.want)
			}
			t.Logf("refused: %v", err)
		})
	}

	t.Run("update to privileged", func(t *testing.T) {
		set := plainSet("policy-update")
		if err := env.Client.Create(t.Context(), set); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
		set.Spec.Containers[0].SecurityContext = privileged
		err := env.Client.Update(t.Context(), set)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "privileged sidecars are not allowed") {
			t.Fatalf("update: %v, want Forbidden by the policy", err)
		}
	})

	// docs/security.md: a set admitted before the policy was bound is
	// found by re-writing it unchanged with a server-side dry run.
	t.Run("set from before the binding", func(t *testing.T) {
		binding, ok := objs[1].(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		if !ok {
			t.Fatalf("config/policy's second object is a %T, want the binding", objs[1])
		}
		if err := env.Client.Delete(t.Context(), binding); err != nil {
			t.Fatal(err)
		}
		probe := plainSet("policy-probe")
		probe.Spec.Containers[0].SecurityContext = privileged
		enforced := func(want bool) error {
			return wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				err := env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
				return apierrors.IsForbidden(err) == want, nil
			})
		}
		if err := enforced(false); err != nil {
			t.Fatalf("the policy is still enforced once its binding is deleted: %v", err)
		}
		set := plainSet("policy-before")
		set.Spec.Containers[0].SecurityContext = privileged
		if err := env.Client.Create(t.Context(), set); err != nil {
			t.Fatalf("create with no binding: %v", err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
		binding.ResourceVersion = ""
		if err := env.Client.Create(t.Context(), binding); err != nil {
			t.Fatal(err)
		}
		if err := enforced(true); err != nil {
			t.Fatalf("the policy is not enforced once bound again: %v", err)
		}
		err := env.Client.Update(t.Context(), set, client.DryRunAll)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "privileged sidecars are not allowed") {
			t.Fatalf("dry-run update of the unchanged set: %v, want Forbidden by the policy", err)
		}
		t.Logf("dry-run re-write of a set from before the binding: %v", err)
	})
}
