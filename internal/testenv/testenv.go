// Package testenv starts a real control plane on loopback: etcd and
// kube-apiserver through controller-runtime's envtest, with the project's
// CRDs installed, and on request kube-controller-manager against them so that
// Deployments, ReplicaSets, StatefulSets, Jobs and garbage collection work.
//
// The binaries come from KUBEBUILDER_ASSETS, which `make test` points at the
// folder hack/control-plane.sh builds. Without them Start fails loudly: an
// integration test that cannot reach a real apiserver must not pass.
package testenv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sidecarset/sidecarset/internal/childproc"
	sidecarscheme "github.com/sidecarset/sidecarset/internal/scheme"
)

// AssetsEnv names the environment variable that holds the folder with etcd,
// kube-apiserver, kube-controller-manager and kubectl.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// Options says what to start besides etcd and kube-apiserver.
type Options struct {
	// ControllerManager starts kube-controller-manager too (every controller
	// except node lifecycle unless NodeLifecycle: it would evict pods from
	// nodes that do not renew leases).
	ControllerManager bool
	// NodeLifecycle runs kube-controller-manager's node lifecycle
	// controller too, for nodes that renew their Lease as a real kubelet
	// does: it takes the not-ready taint, which the apiserver puts on every
	// new node, off a node once it is Ready; until then kube-scheduler
	// places no pod there.
	NodeLifecycle bool
	// Webhooks, when set, are installed into the apiserver pointing at a
	// local serving host and port that envtest allocates; the caller serves
	// the webhooks there with the certificates in LocalServingCertDir.
	Webhooks *envtest.WebhookInstallOptions
	// Output receives the control-plane processes' logs; nil discards them.
	Output io.Writer
	// APIServerFlags are set on kube-apiserver besides envtest's own, by
	// name without the leading dashes: a real node needs some.
	APIServerFlags map[string]string
	// WithoutCRDs leaves the project's CRDs out: what installs the
	// manager (the chart) brings them.
	WithoutCRDs bool
	// ServingAddress, when set, is the IP address kube-apiserver listens
	// on and advertises instead of 127.0.0.1, and its serving certificate
	// names it and the `kubernetes` Service's ClusterIP: pods cannot reach
	// loopback, and the endpoint reconciler refuses it.
	ServingAddress string
}

// errExitedCleanly is how a process that exited with status 0 before it was
// ready exited: exec reports no error for it.
var errExitedCleanly = errors.New("exit status 0")

// Env is a running control plane.
type Env struct {
	// Config reaches the apiserver as a cluster administrator.
	Config *rest.Config
	// Client is a controller-runtime client with the project's scheme.
	Client client.Client
	// Scheme knows the built-in types and the SidecarSet API.
	Scheme *runtime.Scheme
	// KubeConfig is an administrator's kubeconfig for this apiserver.
	KubeConfig []byte
	// Webhooks is what was installed, with the local serving address and
	// certificates filled in; nil unless Options.Webhooks was set.
	Webhooks *envtest.WebhookInstallOptions

	env *envtest.Environment
	kcm *exec.Cmd
	// kcmExited is closed once kube-controller-manager has exited;
	// kcmErr then holds how.
	kcmExited chan struct{}
	kcmErr    error
	dir       string
}

// Assets returns the folder holding the control-plane binaries, checking that
// each one is there.
func Assets() (string, error) {
	dir := os.Getenv(AssetsEnv)
	if dir == "" {
		return "", fmt.Errorf("%s is not set: run the tests with `make test`, or set it to the folder that hack/control-plane.sh prints", AssetsEnv)
	}
	for _, bin := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("%s=%s lacks %s (run hack/control-plane.sh to build it): %w", AssetsEnv, dir, bin, err)
		}
	}
	return dir, nil
}

// Start starts etcd and kube-apiserver, installs the CRDs and, as asked,
// kube-controller-manager and the webhook configurations. Stop it with Stop.
func Start(opts Options) (_ *Env, err error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	scheme := sidecarscheme.New()
	env := &envtest.Environment{BinaryAssetsDirectory: assets, Scheme: scheme}
	if !opts.WithoutCRDs {
		crds, err := CRDs()
		if err != nil {
			return nil, fmt.Errorf("read CRDs: %w", err)
		}
		env.CRDInstallOptions = envtest.CRDInstallOptions{CRDs: crds, Scheme: scheme}
		env.ErrorIfCRDPathMissing = true
	}
	if opts.Webhooks != nil {
		env.WebhookInstallOptions = *opts.Webhooks
	}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", ServiceIPRange)
	// On SIGTERM the apiserver ends its watches within this grace period;
	// without one it waits for the watchers (kube-controller-manager's,
	// the manager's) to go, which they never do, until it is killed 20s
	// later (StopAPIServer, Stop).
	env.ControlPlane.GetAPIServer().Configure().Set("shutdown-watch-termination-grace-period", "2s")
	for name, value := range opts.APIServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	// Made before the control plane: it holds the apiserver's
	// certificates, which outlive the apiserver's process so that
	// RestartAPIServer brings back one its clients still trust.
	dir, err := os.MkdirTemp("", dirPattern)
	if err != nil {
		return nil, err
	}
	env.ControlPlane.GetAPIServer().CertDir = dir
	if opts.ServingAddress != "" {
		if err := serveOn(env, opts.ServingAddress, dir); err != nil {
			return nil, errors.Join(err, os.RemoveAll(dir))
		}
	}
	env.ControlPlane.Etcd = &envtest.Etcd{}
	if opts.Output != nil {
		env.AttachControlPlaneOutput = true
		env.ControlPlane.GetAPIServer().Out = opts.Output
		env.ControlPlane.GetAPIServer().Err = opts.Output
		env.ControlPlane.Etcd.Out, env.ControlPlane.Etcd.Err = opts.Output, opts.Output
	}
	if err := wrapBinaries(env, assets, dir); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	var cfg *rest.Config
	childproc.Do(func() { cfg, err = env.Start() })
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start etcd and kube-apiserver from %s: %w", assets, err), os.RemoveAll(dir))
	}
	e := &Env{Config: cfg, Scheme: scheme, env: env, dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Stop())
		}
	}()
	if opts.Webhooks != nil {
		e.Webhooks = &env.WebhookInstallOptions
	}
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, fmt.Errorf("client for the apiserver: %w", err)
	}
	admin, err := env.AddUser(envtest.User{Name: "sidecarset-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add an administrator: %w", err)
	}
	if e.KubeConfig, err = admin.KubeConfig(); err != nil {
		return nil, fmt.Errorf("administrator kubeconfig: %w", err)
	}
	if opts.ControllerManager {
		if err := e.startControllerManager(assets, opts.NodeLifecycle, opts.Output); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// wrapBinaries has envtest start etcd and kube-apiserver through
// wrappers (childproc.Wrap) in dir, so that they die with this process
// however it ends, as kube-controller-manager does: envtest starts them
// with no parent-death signal, and a killed playground or test binary
// would leave them running.
func wrapBinaries(env *envtest.Environment, assets, dir string) error {
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		return err
	}
	var err error
	if env.ControlPlane.Etcd.Path, err = childproc.Wrap(bin, filepath.Join(assets, "etcd")); err != nil {
		return err
	}
	env.ControlPlane.GetAPIServer().Path, err = childproc.Wrap(bin, filepath.Join(assets, "kube-apiserver"))
	return err
}

func (e *Env) startControllerManager(assets string, nodeLifecycle bool, out io.Writer) error {
	kubeconfig := filepath.Join(e.dir, "kube-controller-manager.kubeconfig")
	if err := os.WriteFile(kubeconfig, e.KubeConfig, 0o600); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	apiserver := e.env.ControlPlane.GetAPIServer()
	// Simulated nodes do not renew leases the way the node lifecycle
	// controller expects; with it on, their pods would be evicted.
	controllers := "*,-nodelifecycle"
	if nodeLifecycle {
		controllers = "*"
	}
	cmd := exec.Command(filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		// Signs the default ServiceAccounts' tokens with the apiserver's key.
		"--service-account-private-key-file="+filepath.Join(apiserver.CertDir, saSignerKey),
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--controllers="+controllers,
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--concurrent-deployment-syncs=10",
		"--concurrent-replicaset-syncs=10",
		"--concurrent-statefulset-syncs=10",
	)
	cmd.Stdout, cmd.Stderr = out, out
	if out == nil {
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Killed with this process, however it ends.
	if err := childproc.Start(cmd); err != nil {
		return fmt.Errorf("start kube-controller-manager: %w", err)
	}
	e.kcm = cmd
	e.kcmExited = make(chan struct{})
	go func() {
		e.kcmErr = cmd.Wait()
		close(e.kcmExited)
	}()

	// The service-account controller creates "default" in every namespace
	// once the controller manager runs: the sign that it is up.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-e.kcmExited:
			return false, fmt.Errorf("kube-controller-manager exited: %w", cmp.Or(e.kcmErr, errExitedCleanly))
		default:
		}
		sa := &corev1.ServiceAccount{}
		err := e.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "default"}, sa)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("wait for kube-controller-manager: %w", err)
	}
	return nil
}

// StopControllerManager stops kube-controller-manager and waits until it is
// gone; it does nothing when none runs. Pods deleted afterwards stay
// deleted: no ReplicaSet or StatefulSet controller creates them again.
func (e *Env) StopControllerManager() {
	if e.kcm == nil {
		return
	}
	// A negative pid signals the whole process group.
	_ = syscall.Kill(-e.kcm.Process.Pid, syscall.SIGTERM)
	select {
	case <-e.kcmExited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-e.kcm.Process.Pid, syscall.SIGKILL)
		<-e.kcmExited
	}
	e.kcm = nil
}

// StopAPIServer stops kube-apiserver, as a control-plane node's restart
// or upgrade does, and waits until it is gone; etcd and everything else
// keep running. StartAPIServer starts it again.
func (e *Env) StopAPIServer() error {
	if err := e.env.ControlPlane.GetAPIServer().Stop(); err != nil {
		return fmt.Errorf("stop kube-apiserver: %w", err)
	}
	return nil
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same address and port, with the same certificates and client CA, and
// returns once it is healthy: every client, kubeconfig and webhook
// configuration made before reaches it as it did.
func (e *Env) StartAPIServer() error {
	var err error
	childproc.Do(func() { err = e.env.ControlPlane.GetAPIServer().Start() })
	if err != nil {
		return fmt.Errorf("start kube-apiserver again: %w", err)
	}
	return nil
}

// Stop stops every process Start started, the controller manager first, and
// removes their files.
func (e *Env) Stop() error {
	var errs []error
	e.StopControllerManager()
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop etcd and kube-apiserver: %w", err))
		}
	}
	if e.dir != "" {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

// dirPattern names the folder of a control plane's own files in the
// temporary folder: kube-controller-manager's kubeconfig, and the
// apiserver's certificates when it serves on ServingAddress.
const dirPattern = "sidecarset-testenv-"

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// AddUser returns a config that reaches the apiserver as user name in groups,
// authorized by RBAC only: to run a component with exactly the permissions it
// is given.
func (e *Env) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("add user %s: %w", name, err)
	}
	return u.Config(), nil
}
