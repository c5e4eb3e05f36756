package manager_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/config"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/kubeletsim"
	"github.com/sidecarset/sidecarset/internal/manager"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.SetLogger()
	os.Exit(m.Run())
}

func startEnv(t *testing.T) *testenv.Env {
	t.Helper()
	hooks, err := testenv.WebhookOptions("")
	if err != nil {
		t.Fatal(err)
	}
	env, err := testenv.Start(testenv.Options{Webhooks: hooks})
	if err != nil {
		t.Fatalf("start the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	return env
}

// applyRBAC creates the generated ClusterRole and Role and binds them to
// subject; more are config/rbac's further roles (config.PolicyRBAC).
func applyRBAC(t *testing.T, env *testenv.Env, namespace string, subject rbacv1.Subject, more ...[]byte) {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{subject}
	roles := bytes.Join(append([][]byte{config.RBAC}, more...), []byte("\n---\n"))
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(roles)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "ClusterRole":
			role := &rbacv1.ClusterRole{}
			mustDecode(t, doc, role)
			create(t, env, role)
			create(t, env, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   subjects,
			})
		case "Role":
			role := &rbacv1.Role{}
			mustDecode(t, doc, role)
			create(t, env, role)
			create(t, env, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: role.Namespace, Name: role.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
				Subjects:   subjects,
			})
		case "":
		default:
			t.Fatalf("unexpected %s in config/rbac", meta.Kind)
		}
	}
}

func mustDecode(t *testing.T, doc []byte, obj any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, env *testenv.Env, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// TestManagerRunsWithItsRBAC runs the manager as a user that holds only the
// generated roles, through injection, an in-place update and status: a
// permission missing from config/rbac fails here, not in a user's cluster.
// With --injection=webhook the manager holds its own role only; with
// policy, the policy role too, and the set is injected by its policy.
func TestManagerRunsWithItsRBAC(t *testing.T) {
	t.Run("webhook", func(t *testing.T) { testManagerRunsWithItsRBAC(t, manager.InjectionWebhook) })
	t.Run("policy", func(t *testing.T) { testManagerRunsWithItsRBAC(t, manager.InjectionPolicy) })
}

func testManagerRunsWithItsRBAC(t *testing.T, injection manager.Injection) {
	env := startEnv(t)
	ctx := t.Context()
	opts := manager.DefaultOptions()
	opts.Injection = injection
	var more [][]byte
	if injection != manager.InjectionWebhook {
		more = append(more, config.PolicyRBAC)
	}
	applyRBAC(t, env, opts.Namespace, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "sidecarset-manager"}, more...)
	cfg, err := env.AddUser("sidecarset-manager")
	if err != nil {
		t.Fatal(err)
	}

	sim, err := kubeletsim.New(env.Config, kubeletsim.Options{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	simCtx, stopSim := context.WithCancel(context.Background())
	simDone := make(chan struct{})
	go func() { _ = sim.Run(simCtx); close(simDone) }()
	t.Cleanup(func() { stopSim(); <-simDone })
	if err := sim.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	_, mgrDone, err := env.StartManager(mgrCtx, cfg, opts)
	if err != nil {
		stopMgr()
		t.Fatalf("start the manager with its own RBAC: %v", err)
	}
	t.Cleanup(func() {
		stopMgr()
		if err := <-mgrDone; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	labels := map[string]string{"app": "rbac"}
	set := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac"},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: labels},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "exporter", Image: "exporter:v1"}}},
		},
	}
	create(t, env, set)
	// The validator's dry-run pod create needs its own permission: without
	// it the set below would be accepted with a warning.
	refused := set.DeepCopy()
	refused.Name, refused.ResourceVersion = "rbac-refused", ""
	refused.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rbac-refused"}}
	refused.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)}
	if err := env.Client.Create(ctx, refused); !apierrors.IsInvalid(err) {
		t.Errorf("create a SidecarSet the pod validation refuses = %v, want Invalid", err)
	}
	if injection == manager.InjectionPolicy {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			var got v1alpha1.SidecarSet
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(set), &got); err != nil {
				return false, err
			}
			return got.Status.Injection != nil && got.Status.Injection.Path == v1alpha1.InjectionPolicy, nil
		})
		if err != nil {
			t.Fatalf("wait for the set's policy to inject it, under the manager's own RBAC: %v", err)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rbac", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
	// The webhook's cache may not have the set yet: retry until injected.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		probe := pod.DeepCopy()
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, err
		}
		return len(probe.Spec.Containers) == 2, nil
	})
	if err != nil {
		t.Fatalf("wait for injection: %v", err)
	}
	create(t, env, pod)

	patch := client.RawPatch("application/json-patch+json", []byte(`[{"op":"replace","path":"/spec/containers/0/image","value":"exporter:v2"}]`))
	if err := env.Client.Patch(ctx, set, patch); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.SidecarSet
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(set), &got); err != nil {
			return false, err
		}
		return got.Status.ObservedGeneration == got.Generation && got.Status.UpdatedReadyPods == 1, nil
	})
	if err != nil {
		t.Fatalf("in-place update under the manager's own RBAC: %v; status %+v", err, got.Status)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Containers[0].Image != "exporter:v2" {
		t.Errorf("pod sidecar image %s, want exporter:v2", pod.Spec.Containers[0].Image)
	}
}

// serviceAccount returns a config that reaches the apiserver as the
// manager's ServiceAccount in namespace (the chart's sidecarset-manager),
// through the administrator's impersonation: authorized by RBAC only, as the
// manager's pod is.
func serviceAccount(env *testenv.Env, namespace string) (*rest.Config, rbacv1.Subject) {
	const name = "sidecarset-manager"
	cfg := rest.CopyConfig(env.Config)
	// The user name and groups the apiserver gives a ServiceAccount's
	// token.
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}
}

// TestCertRotation: with --cert-rotation the manager writes its own CA and
// serving certificate into the Secret, injects the CA into both webhook
// configurations, and serves the webhooks with that certificate once it is
// mounted. It runs as its ServiceAccount with exactly config/rbac's roles
// (the chart's, as test/chart checks), and may change no Secret, webhook
// configuration or Lease but its own. The test plays the kubelet's part of
// mounting the Secret.
func TestCertRotation(t *testing.T) {
	env := startEnv(t)
	ctx := t.Context()
	opts := manager.DefaultOptions()
	opts.CertRotation = true
	opts.CertDir = t.TempDir()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg, subject := serviceAccount(env, opts.Namespace)
	applyRBAC(t, env, opts.Namespace, subject)
	create(t, env, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.CertSecret}})

	// Mount the Secret as the kubelet would, some time after it has data
	// (a kubelet refreshes a mounted Secret within about a minute).
	const mountDelay = 10 * time.Second
	mounted := make(chan time.Time, 1)
	go func() {
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			s := &corev1.Secret{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: opts.CertSecret}, s); err != nil {
				return false, nil // not yet: the poll tries again
			}
			if len(s.Data["tls.crt"]) == 0 {
				return false, nil
			}
			select {
			case <-time.After(mountDelay):
			case <-ctx.Done():
				return false, ctx.Err()
			}
			defer func() { mounted <- time.Now() }()
			for name, data := range s.Data {
				if err := os.WriteFile(filepath.Join(opts.CertDir, name), data, 0o600); err != nil {
					return false, err
				}
			}
			return true, nil
		})
	}()

	mgrCtx, stopMgr := context.WithCancel(context.Background())
	// Not testenv.StartManager: it would point the manager at envtest's
	// certificates.
	opts.WebhookHost, opts.WebhookPort = "127.0.0.1", port
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.SeveralPerProcess = true
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stopMgr()
		if err := <-mgrDone; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	secret := &corev1.Secret{}
	var conn *tls.Conn
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: opts.CertSecret}, secret); err != nil {
			return false, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(secret.Data["ca.crt"]) {
			return false, nil
		}
		c, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &tls.Config{
			RootCAs:    pool,
			ServerName: fmt.Sprintf("%s.%s.svc", opts.WebhookService, opts.Namespace),
		})
		if err != nil {
			return false, nil //nolint:nilerr // not yet: the poll tries again
		}
		conn = c
		return true, nil
	})
	if err != nil {
		t.Fatalf("webhook server never served the rotated certificate: %v (secret keys %d)", err, len(secret.Data))
	}
	_ = conn.Close()
	// Served soon after the mount, whenever the mount came: the manager
	// looks for the files every second.
	if lag := time.Since(<-mounted); lag > 4*time.Second {
		t.Errorf("webhooks served %v after the certificate was mounted, want within 4s", lag.Round(time.Millisecond))
	}

	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "sidecarset-mutating"}, mutating); err != nil {
		t.Fatal(err)
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "sidecarset-validating"}, validating); err != nil {
		t.Fatal(err)
	}
	for _, w := range mutating.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, secret.Data["ca.crt"]) {
			t.Errorf("mutating webhook %s caBundle is not the rotated CA", w.Name)
		}
	}
	for _, w := range validating.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, secret.Data["ca.crt"]) {
			t.Errorf("validating webhook %s caBundle is not the rotated CA", w.Name)
		}
	}

	// Elected through its own Lease.
	lease := &coordinationv1.Lease{}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: manager.LeaderElectionID}, lease)
		return err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != "", client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("the manager never held its Lease %s: %v", manager.LeaderElectionID, err)
	}

	// Nothing but its own.
	others := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: "other"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: "other"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
	}
	asManager, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range others {
		create(t, env, obj)
		what := fmt.Sprintf("%T %s", obj, obj.GetName())
		obj.SetLabels(map[string]string{"changed": "true"})
		if err := asManager.Update(ctx, obj); !apierrors.IsForbidden(err) {
			t.Errorf("update %s as the manager: %v, want Forbidden", what, err)
		}
		if err := asManager.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"changed":"true"}}}`))); !apierrors.IsForbidden(err) {
			t.Errorf("patch %s as the manager: %v, want Forbidden", what, err)
		}
		if err := asManager.Delete(ctx, obj); !apierrors.IsForbidden(err) {
			t.Errorf("delete %s as the manager: %v, want Forbidden", what, err)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// TestNotReadyBeforeCachesSynced: /readyz fails while the cache the webhooks
// read from has not synced, although the webhook server already answers;
// it passes once the cache has synced. The apiserver's answers to the
// manager's lists and watches of SidecarSets are held back to keep the cache
// unsynced.
func TestNotReadyBeforeCachesSynced(t *testing.T) {
	env := startEnv(t)
	ctx := t.Context()
	opts := manager.DefaultOptions()
	create(t, env, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}})
	release := make(chan struct{})
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			// A list or a watch-list (an informer's first watch with
			// sendInitialEvents), whichever the informer makes.
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/sidecarsets") {
				select {
				case <-release:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			return rt.RoundTrip(req)
		})
	}
	probePort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	opts.ProbeAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(probePort))
	opts.MetricsAddr = "0"
	opts.WebhookHost, opts.WebhookPort, opts.CertDir = env.Webhooks.LocalServingHost, env.Webhooks.LocalServingPort, env.Webhooks.LocalServingCertDir
	opts.SeveralPerProcess = true
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stopMgr()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})

	readyz := func() (int, string) {
		resp, err := http.Get("http://" + opts.ProbeAddr + "/readyz?verbose")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	started := mgr.GetWebhookServer().StartedChecker()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, _ := readyz()
		return code != 0 && started(&http.Request{}) == nil, nil
	})
	if err != nil {
		t.Fatalf("the webhook server and the probe never answered: %v", err)
	}
	// Ready must stay false while the cache waits, however long.
	for range 10 {
		if code, body := readyz(); code == http.StatusOK {
			t.Fatalf("/readyz answered 200 before the cache synced:\n%s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(release)
	released = true
	var code int
	var body string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, body = readyz()
		return code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("/readyz never passed once the cache could sync: %d\n%s", code, body)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestWriteTimeoutWithinTakeover: a pod write of a leader that lost its
// lease ends before another manager may take over.
func TestWriteTimeoutWithinTakeover(t *testing.T) {
	// The leader gives up at most RetryPeriod+RenewDeadline after its last
	// renewal (client-go's LeaderElector.renew); others take over
	// LeaseDuration after it.
	if room := manager.LeaseDuration - manager.RetryPeriod - manager.RenewDeadline; controller.WriteTimeout >= room {
		t.Errorf("pod writes may take %v, more than the %v between a leader giving up and a takeover",
			controller.WriteTimeout, room)
	}
}
