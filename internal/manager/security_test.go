package manager_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/manager"
	"github.com/sidecarset/sidecarset/internal/testenv"
	sidecarwebhook "github.com/sidecarset/sidecarset/internal/webhook"
)

// TestWebhookRefusesOldTLS: the webhook server completes no handshake older
// than TLS 1.2, even when the process's GODEBUG asks Go's TLS servers to
// accept TLS 1.0 and 1.1 again (tls10server=1); TLS 1.2 and 1.3 succeed.
func TestWebhookRefusesOldTLS(t *testing.T) {
	t.Setenv("GODEBUG", "tls10server=1")
	env := startEnv(t)
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	_, done, err := env.StartManager(mgrCtx, nil, manager.DefaultOptions())
	if err != nil {
		stopMgr()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopMgr()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	// envtest's CA, which it put in the webhook configurations.
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(env.Webhooks.MutatingWebhooks[0].Webhooks[0].ClientConfig.CABundle) {
		t.Fatal("no CA in the installed webhook configuration")
	}
	addr := net.JoinHostPort(env.Webhooks.LocalServingHost, strconv.Itoa(env.Webhooks.LocalServingPort))
	for _, tc := range []struct {
		name    string
		version uint16
		want    bool
	}{
		{"TLS 1.0", tls.VersionTLS10, false},
		{"TLS 1.1", tls.VersionTLS11, false},
		{"TLS 1.2", tls.VersionTLS12, true},
		{"TLS 1.3", tls.VersionTLS13, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", addr, &tls.Config{
				RootCAs:    pool,
				ServerName: env.Webhooks.LocalServingHost,
				MinVersion: tc.version,
				MaxVersion: tc.version,
			})
			if err == nil {
				defer conn.Close()
			}
			switch {
			case tc.want && err != nil:
				t.Errorf("%s handshake refused: %v", tc.name, err)
			case !tc.want && err == nil:
				t.Errorf("%s handshake accepted (negotiated %s), want refused", tc.name, tls.VersionName(conn.ConnectionState().Version))
			case !tc.want && !strings.Contains(err.Error(), "protocol version"):
				t.Errorf("%s handshake failed with %v, want a protocol version alert", tc.name, err)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a child process's output and the
// test's reads at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNoSecretsInLogs runs the manager's binary as a cluster runs it: as
// its ServiceAccount with a bearer token and config/rbac's roles, rotating
// its own webhook certificate, logging at the most verbose level. Through
// the first certificate, a forced rotation (the Secret emptied), pod
// injections and SidecarSet validations (which call the apiserver with the
// token), its logs must hold no private key, no part of the Secret's data,
// no token, and none of the Secret data an injected pod refers to.
//
// The apiserver calls the webhooks at 127.0.0.1, which the rotated
// certificate (issued for the Service's name) does not cover, so the test
// posts the AdmissionReviews itself, as the apiserver would, and both
// webhook configurations ignore the apiserver's own failing calls.
func TestNoSecretsInLogs(t *testing.T) {
	hooks, err := testenv.WebhookOptions(admissionregistrationv1.Ignore)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range hooks.ValidatingWebhooks {
		for i := range v.Webhooks {
			v.Webhooks[i].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}
	}
	for _, m := range hooks.MutatingWebhooks {
		for i := range m.Webhooks {
			m.Webhooks[i].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}
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
	ctx := t.Context()
	opts := manager.DefaultOptions()
	const saName = "sidecarset-manager"
	applyRBAC(t, env, opts.Namespace, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: saName, Namespace: opts.Namespace})
	create(t, env, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: saName}})
	create(t, env, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.CertSecret}})
	const appSecretValue = "app-password-7f3c9d2e41b8"
	create(t, env, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app-credentials"},
		StringData: map[string]string{"password": appSecretValue},
	})

	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(opts.Namespace).CreateToken(ctx, saName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a token for the manager's ServiceAccount: %v", err)
	}
	token := tr.Status.Token
	kubeconfig, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"test": {Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{saName: {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"test": {Cluster: "test", AuthInfo: saName}},
		CurrentContext: "test",
	})
	if err != nil {
		t.Fatal(err)
	}

	// Mount the Secret as the kubelet would, each time its data changes.
	certDir := t.TempDir()
	go func() {
		var mounted string
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			s := &corev1.Secret{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: opts.CertSecret}, s); err != nil {
				return false, nil //nolint:nilerr // not yet: the poll tries again
			}
			if len(s.Data["tls.crt"]) == 0 || string(s.Data["tls.crt"]) == mounted {
				return false, nil
			}
			for name, data := range s.Data {
				if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
					return false, err
				}
			}
			mounted = string(s.Data["tls.crt"])
			return false, nil
		})
	}()

	bin, err := testenv.ManagerBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testenv.RemoveManagerBinary() })
	logs := &syncBuffer{}
	p, err := env.NewManagerProcess(testenv.ProcessOptions{
		Binary:     bin,
		Namespace:  opts.Namespace,
		Output:     logs,
		KubeConfig: kubeconfig,
		// The zap level 10 logs every V-level the code has.
		Args: []string{"--cert-rotation", "--cert-dir=" + certDir, "--zap-log-level=10", "--zap-devel"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("manager logs:\n%s", logs.String())
		}
	})
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}

	addr := net.JoinHostPort(env.Webhooks.LocalServingHost, strconv.Itoa(env.Webhooks.LocalServingPort))
	serverName := fmt.Sprintf("%s.%s.svc", opts.WebhookService, opts.Namespace)
	var secrets [][]byte
	secret := waitCert(t, env, opts, addr, serverName, nil)
	secrets = append(secrets, secretValues(secret)...)

	set := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "logs"},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "logs"}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "exporter", Image: "exporter:v1"}}},
		},
	}
	create(t, env, set)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(set), set); err != nil {
		t.Fatal(err)
	}
	caller := webhookCaller(t, secret.Data["ca.crt"], addr, serverName)
	injectPods(t, caller, "before-rotation", appSecretValue)
	caller.review(t, sidecarwebhook.SidecarSetValidatorPath, "sidecarset.dev", "v1alpha1", "SidecarSet", "sidecarsets", "", set)

	// Rotate: an emptied Secret makes the manager issue a new CA and
	// certificate, which the webhook server loads once mounted.
	secret.Data = nil
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rotated := waitCert(t, env, opts, addr, serverName, secrets[0])
	secrets = append(secrets, secretValues(rotated)...)
	caller = webhookCaller(t, rotated.Data["ca.crt"], addr, serverName)
	injectPods(t, caller, "after-rotation", appSecretValue)
	caller.review(t, sidecarwebhook.SidecarSetValidatorPath, "sidecarset.dev", "v1alpha1", "SidecarSet", "sidecarsets", "", set)

	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	// The logs must be there to be searched: both certificate issues and
	// the admission requests were logged.
	if n := strings.Count(out, "refreshing CA and server certs"); n < 2 {
		t.Errorf("the logs tell %d certificate issues, want 2 (the first and the rotation)", n)
	}
	for _, want := range []string{"server certs refreshed", "Ensuring CA cert", sidecarwebhook.PodMutatorPath} {
		if !strings.Contains(out, want) {
			t.Errorf("the logs lack %q: the test would not see what it looks for", want)
		}
	}
	forbidden := map[string]string{
		"PRIVATE KEY":            "a PEM private key",
		"Bearer ":                "an Authorization header",
		token:                    "the ServiceAccount token",
		tokenSignature(t, token): "the token's signature",
		appSecretValue:           "Secret data an injected pod refers to",
		base64.StdEncoding.EncodeToString([]byte(appSecretValue)): "that Secret data, base64-encoded",
	}
	for _, v := range secrets {
		forbidden[string(v)] = "the webhook certificate Secret's data"
		forbidden[base64.StdEncoding.EncodeToString(v)] = "the webhook certificate Secret's data, base64-encoded"
		for _, line := range pemBody(v) {
			forbidden[line] = "a line of a private key's PEM body"
		}
	}
	for s, what := range forbidden {
		if strings.Contains(out, s) {
			t.Errorf("the manager's logs hold %s", what)
		}
	}
	t.Logf("searched %d KiB of the manager's logs for %d secrets", len(out)/1024, len(forbidden))
}

// waitCert waits until the Secret holds a certificate whose CA is not
// previous and the webhook server serves it, and returns the Secret.
func waitCert(t *testing.T, env *testenv.Env, opts manager.Options, addr, serverName string, previous []byte) *corev1.Secret {
	t.Helper()
	secret := &corev1.Secret{}
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: opts.CertSecret}, secret); err != nil {
			return false, err
		}
		ca := secret.Data["ca.crt"]
		if len(ca) == 0 || bytes.Equal(ca, previous) {
			return false, nil
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return false, nil
		}
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: serverName})
		if err != nil {
			return false, nil //nolint:nilerr // not yet: the poll tries again
		}
		_ = conn.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("the webhook server never served a new rotated certificate: %v", err)
	}
	return secret
}

// secretValues returns the private keys of the certificate Secret: the
// certificates are public.
func secretValues(s *corev1.Secret) [][]byte {
	var out [][]byte
	for name, v := range s.Data {
		if strings.HasSuffix(name, ".key") {
			out = append(out, v)
		}
	}
	return out
}

// pemBody returns the base64 lines of a PEM block's body, long enough not
// to be found by chance.
func pemBody(pem []byte) []string {
	var out []string
	for _, line := range strings.Split(string(pem), "\n") {
		if len(line) >= 32 && !strings.HasPrefix(line, "-----") {
			out = append(out, line)
		}
	}
	return out
}

// tokenSignature returns the signature of a JWT: what makes it a
// credential.
func tokenSignature(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[2]) < 16 {
		t.Fatalf("the token is not a signed JWT")
	}
	return parts[2]
}

// admissionCaller posts AdmissionReviews to the webhook server, as the
// apiserver does.
type admissionCaller struct {
	http *http.Client
	base string
}

func webhookCaller(t *testing.T, ca []byte, addr, serverName string) *admissionCaller {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no CA certificate to call the webhooks with")
	}
	return &admissionCaller{
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName}}},
		base: "https://" + addr,
	}
}

// review posts a CREATE of obj to path and returns the response; it fails
// the test unless the request is allowed.
func (c *admissionCaller) review(t *testing.T, path, group, version, kind, resource, namespace string, obj runtime.Object) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	req := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID(fmt.Sprintf("review-%d", time.Now().UnixNano())),
			Kind:      metav1.GroupVersionKind{Group: group, Version: version, Kind: kind},
			Resource:  metav1.GroupVersionResource{Group: group, Version: version, Resource: resource},
			Namespace: namespace,
			Operation: admissionv1.Create,
			UserInfo:  authenticationv1.UserInfo{Username: "test"},
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.http.Post(c.base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("post an AdmissionReview to %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &got); err != nil || got.Response == nil {
		t.Fatalf("AdmissionReview from %s: %v\n%s", path, err, data)
	}
	if !got.Response.Allowed {
		t.Fatalf("%s refused the %s: %+v", path, kind, got.Response.Result)
	}
	return got.Response
}

// injectPods sends the pod mutator pods that match the set "logs", one
// taking an env var from a Secret, and checks that each is injected.
func injectPods(t *testing.T, c *admissionCaller, prefix, secretValue string) {
	t.Helper()
	for i := range 3 {
		pod := &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", prefix, i), Labels: map[string]string{"app": "logs"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "app:1",
				Env: []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "app-credentials"}, Key: "password",
				}}}},
			}}},
		}
		if i == 0 {
			// A value pasted into the spec, as some users do: the
			// manager must not log the pod it patches either.
			pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "INLINE", Value: secretValue})
		}
		var resp *admissionv1.AdmissionResponse
		// The webhook's cache may not have the set yet.
		err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			resp = c.review(t, sidecarwebhook.PodMutatorPath, "", "v1", "Pod", "pods", "default", pod)
			return len(resp.Patch) > 0, nil
		})
		if err != nil {
			t.Fatalf("pod %s never injected: %v", pod.Name, err)
		}
	}
}
