package testenv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/internal/manager"
)

// ManagerPackage is the package of the manager's binary.
const ManagerPackage = "github.com/sidecarset/sidecarset/cmd/sidecarset-manager"

var managerBinary struct {
	mu   sync.Mutex
	dir  string
	path string
}

// ManagerBinary builds the sidecarset-manager binary with `go build`, the
// first time it is called in a process, into a folder of its own, and
// returns its path. The caller's working directory must be inside the
// module, as a test's is. RemoveManagerBinary removes it; a test package
// that builds it calls that from TestMain, once its tests are done.
func ManagerBinary(ctx context.Context) (string, error) {
	managerBinary.mu.Lock()
	defer managerBinary.mu.Unlock()
	if managerBinary.path != "" {
		return managerBinary.path, nil
	}
	dir, err := os.MkdirTemp("", "sidecarset-manager-bin-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "sidecarset-manager")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", path, ManagerPackage).CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("go build %s: %w\n%s", ManagerPackage, err, out)
	}
	managerBinary.dir, managerBinary.path = dir, path
	return path, nil
}

// RemoveManagerBinary removes what ManagerBinary built; it does nothing if
// nothing was built.
func RemoveManagerBinary() error {
	managerBinary.mu.Lock()
	defer managerBinary.mu.Unlock()
	if managerBinary.dir == "" {
		return nil
	}
	err := os.RemoveAll(managerBinary.dir)
	managerBinary.dir, managerBinary.path = "", ""
	return err
}

// ProcessOptions say how to run the manager's binary.
type ProcessOptions struct {
	// Binary is the sidecarset-manager binary (ManagerBinary).
	Binary string
	// Namespace is the manager's namespace (--namespace), where it holds
	// its Lease and keeps revisions. It must exist.
	Namespace string
	// Output receives each process's stdout and stderr; nil discards them.
	Output io.Writer
	// WebhookPort, when not 0, is where the process serves the webhooks,
	// on the environment's webhook host, instead of where the apiserver's
	// webhook configurations point: replicas each serve on a port of their
	// own, behind a Service (StartService) that listens there.
	WebhookPort int
	// KubeConfig is the kubeconfig the process reaches the apiserver with;
	// nil means the environment's administrator's.
	KubeConfig []byte
	// Args are flags given after the ones ManagerProcess sets; a flag given
	// again here wins.
	Args []string
}

// ManagerProcess runs the sidecarset-manager binary as a child process
// against the environment, one process at a time, with the flags a
// cluster's manager runs with, except where the environment differs: the
// webhooks are served where the apiserver's webhook configurations point
// (as StartManager does for a manager in the test's process), or at
// ProcessOptions.WebhookPort behind a Service; metrics and the health
// probes listen on free loopback ports (MetricsURL). Leader election is
// on, as the binary's default: after Kill the Lease stays held by the dead
// process until it expires, and the next process waits for that.
type ManagerProcess struct {
	env        *Env
	opts       ProcessOptions
	kubeconfig string

	cmd *exec.Cmd
	// metricsURL is where the running process serves its metrics.
	metricsURL string
	exited     chan struct{}
	err        error
	// readyz is the running process's readiness URL.
	readyz string
	// holderAtStart is who held the Lease when the running process
	// started: the process leads once someone else holds it.
	holderAtStart string
}

// NewManagerProcess prepares a manager process: it writes its kubeconfig
// (the administrator's unless opts.KubeConfig) into the environment's
// folder. Nothing runs
// until Start.
func (e *Env) NewManagerProcess(opts ProcessOptions) (*ManagerProcess, error) {
	if opts.Binary == "" || opts.Namespace == "" {
		return nil, errors.New("a manager process needs its binary and its namespace")
	}
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	f, err := os.CreateTemp(e.dir, "sidecarset-manager-*.kubeconfig")
	if err != nil {
		return nil, err
	}
	kubeconfig := opts.KubeConfig
	if kubeconfig == nil {
		kubeconfig = e.KubeConfig
	}
	_, err = f.Write(kubeconfig)
	if err = errors.Join(err, f.Close()); err != nil {
		return nil, fmt.Errorf("write the manager's kubeconfig: %w", err)
	}
	return &ManagerProcess{env: e, opts: opts, kubeconfig: f.Name()}, nil
}

// Start starts a manager process and returns once its /readyz answers: its
// webhooks are served and its caches synced. It may not lead yet
// (WaitLeading).
func (p *ManagerProcess) Start(ctx context.Context) error {
	if p.cmd != nil {
		return fmt.Errorf("manager process %d is still running", p.cmd.Process.Pid)
	}
	holder, err := p.LeaseHolder(ctx)
	if err != nil {
		return err
	}
	probePort, err := FreePort()
	if err != nil {
		return err
	}
	metricsPort, err := FreePort()
	if err != nil {
		return err
	}
	probeAddr := "127.0.0.1:" + strconv.Itoa(probePort)
	metricsAddr := "127.0.0.1:" + strconv.Itoa(metricsPort)
	args := []string{
		"--kubeconfig=" + p.kubeconfig,
		"--namespace=" + p.opts.Namespace,
		"--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=" + probeAddr,
	}
	if w := p.env.Webhooks; w != nil {
		args = append(args,
			"--webhook-host="+w.LocalServingHost,
			"--webhook-port="+strconv.Itoa(p.webhookPort()),
			"--cert-dir="+w.LocalServingCertDir)
	}
	args = append(args, p.opts.Args...)
	cmd := exec.Command(p.opts.Binary, args...)
	cmd.Stdout, cmd.Stderr = p.opts.Output, p.opts.Output
	// A test binary that dies (a timeout's panic) leaves no manager
	// running. The signal follows the thread that started the child; the
	// Go runtime ends no thread but one locked by a goroutine that exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// One process runs at a time: a line before each tells their output
	// apart.
	fmt.Fprintf(p.opts.Output, "=== %s %s (%s)\n", p.opts.Binary, strings.Join(args, " "), time.Now().Format(time.StampMilli))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.opts.Binary, err)
	}
	p.cmd, p.exited, p.err, p.holderAtStart = cmd, make(chan struct{}), nil, holder
	p.metricsURL = "http://" + metricsAddr + "/metrics"
	go func(exited chan struct{}) {
		p.err = cmd.Wait()
		close(exited)
	}(p.exited)

	readyz := "http://" + probeAddr + "/readyz"
	p.readyz = readyz
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("manager process %d exited: %w", cmd.Process.Pid, cmp.Or(p.err, errExitedCleanly))
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyz, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not yet: the poll tries again
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("wait for %s: %w", readyz, err), p.Kill())
	}
	return nil
}

func (p *ManagerProcess) webhookPort() int {
	if p.opts.WebhookPort != 0 {
		return p.opts.WebhookPort
	}
	return p.env.Webhooks.LocalServingPort
}

// Endpoint returns the last process started as an endpoint of a Service
// (StartService): where it serves the webhooks, its readiness URL, and the
// channel closed once it has exited.
func (p *ManagerProcess) Endpoint(name string) Endpoint {
	addr := ""
	if w := p.env.Webhooks; w != nil {
		addr = net.JoinHostPort(w.LocalServingHost, strconv.Itoa(p.webhookPort()))
	}
	return Endpoint{Name: name, Addr: addr, Readyz: p.readyz, Exited: p.exited}
}

// Pid is the running process's id, 0 when none runs.
func (p *ManagerProcess) Pid() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// MetricsURL is where the running process serves its metrics, over plain
// HTTP as the chart's manager does, unless ProcessOptions.Args gives
// another --metrics-bind-address; "" when none runs.
func (p *ManagerProcess) MetricsURL() string {
	if p.cmd == nil {
		return ""
	}
	return p.metricsURL
}

// Kill kills the running process with SIGKILL, as the kernel's OOM killer
// or a node's loss does: it gets no chance to give its Lease up or finish
// its work. Kill waits until the process is gone; it does nothing when none
// runs.
func (p *ManagerProcess) Kill() error {
	return p.signal(syscall.SIGKILL, 10*time.Second)
}

// Stop stops the running process with SIGTERM, as the kubelet stops a pod,
// and waits until it is gone: it drains, finishes its work in flight and
// gives its Lease up (15s at most with the binary's defaults). A process
// still running 45s after SIGTERM is killed, and Stop says so.
func (p *ManagerProcess) Stop() error {
	return p.signal(syscall.SIGTERM, 45*time.Second)
}

func (p *ManagerProcess) signal(sig syscall.Signal, timeout time.Duration) error {
	if p.cmd == nil {
		return nil
	}
	pid := p.cmd.Process.Pid
	defer func() { p.cmd = nil }()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("send %v to manager process %d: %w", sig, pid, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("manager process %d still ran %v after %v: killed", pid, timeout, sig)
	}
}

// WaitLeading waits until the running process holds the Lease: someone
// other than the holder when it started, since no other manager may run.
func (p *ManagerProcess) WaitLeading(ctx context.Context, timeout time.Duration) error {
	if p.cmd == nil {
		return errors.New("no manager process runs")
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("manager process %d exited: %w", p.cmd.Process.Pid, cmp.Or(p.err, errExitedCleanly))
		default:
		}
		holder, err := p.LeaseHolder(ctx)
		return holder != "" && holder != p.holderAtStart, err
	})
	if err != nil {
		return fmt.Errorf("wait for manager process %d to hold Lease %s/%s: %w", p.cmd.Process.Pid, p.opts.Namespace, manager.LeaderElectionID, err)
	}
	return nil
}

// LeaseHolder returns the identity that holds the managers' Lease, empty
// when there is none or it was given up.
func (p *ManagerProcess) LeaseHolder(ctx context.Context) (string, error) {
	lease := &coordinationv1.Lease{}
	err := p.env.Client.Get(ctx, client.ObjectKey{Namespace: p.opts.Namespace, Name: manager.LeaderElectionID}, lease)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get Lease %s/%s: %w", p.opts.Namespace, manager.LeaderElectionID, err)
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}
