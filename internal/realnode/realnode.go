// Package realnode runs a real node against a testenv control plane: the
// kubelet, kube-scheduler and kube-proxy v1.37.2 that `hack/control-plane.sh
// kubelet` builds, containerd, runc and the CNI bridge plugin from Debian,
// and test images built locally (busybox, and with it the exporter of
// test/images/exporter). Everything it runs lives in one folder of its own;
// Stop ends its processes by PID, unmounts what they mounted and removes what
// they created, kube-proxy's iptables rules included. It needs root and a
// Debian machine; docs/real-node.md says what a single machine needs and
// why.
package realnode

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// NodeName is the node's name. With it, and kube-apiserver flag
// --kubelet-preferred-address-types=Hostname, the apiserver reaches the
// kubelet on loopback without a DNS lookup; any other name would send one
// off the machine.
const NodeName = "localhost"

// APIServerAddress is the address kube-apiserver listens on and
// advertises for a real node (testenv.Options.ServingAddress): the node's
// own address on the pods' bridge, which New creates before the control
// plane starts. Pods reach it through the `kubernetes` Service (kube-proxy
// rewrites the ClusterIP to it); they cannot reach loopback.
const APIServerAddress = bridgeIP

// APIServerFlags are the kube-apiserver flags a real node needs (see
// testenv.Options.APIServerFlags).
func APIServerFlags() map[string]string {
	return map[string]string{
		"kubelet-preferred-address-types": "Hostname",
		// Webhooks and aggregated APIs behind a Service are called at an
		// endpoint (pod IP and target port), which the node routes to
		// over the bridge, rather than at the ClusterIP.
		"enable-aggregator-routing": "true",
		// envtest disables the ServiceAccount admission plugin, which
		// gives a pod its ServiceAccount token volume: without it a
		// Deployment's pods get no token and cannot reach the apiserver.
		"disable-admission-plugins": "",
	}
}

// packages are the Debian packages the node runs on.
var packages = []string{"containerd", "runc", "containernetworking-plugins", "busybox-static"}

// Options says what the node runs.
type Options struct {
	// Assets is the folder with the kubelet, kube-scheduler and
	// kube-proxy binaries (KUBEBUILDER_ASSETS).
	Assets string
	// Images are built and imported before the kubelet starts.
	Images []Image
	// Output receives the logs of containerd, the kubelet, kube-scheduler
	// and kube-proxy; nil discards them.
	Output io.Writer
}

// Node is a running node.
type Node struct {
	// ImageIDs maps each imported image's reference to the imageID the
	// kubelet reports for it: repository@manifest digest.
	ImageIDs map[string]string
	// Digests maps each imported image's reference to its manifest
	// digest; the node also knows the image by repository@digest.
	Digests map[string]string

	dir        string
	assets     string
	out        io.Writer
	client     kubernetes.Interface
	containerd *process
	kubelet    *process
	scheduler  *process
	proxy      *process
	state      state
	// exporterBin is the exporter, once an image asked for it.
	exporterBin string
	// locked: the node holds the machine's real-node lock until Stop.
	locked bool
}

// state is what a later Start needs to tear a node down whose test was
// interrupted before Stop; it is kept as stateFile in the node's folder.
// Teardown removes only what it records the node created.
type state struct {
	// Owner is the PID of the process that started the node, and
	// OwnerStart when it started (see proc.Start): a PID alone may name
	// a later process.
	Owner      int    `json:"owner"`
	OwnerStart uint64 `json:"ownerStart,omitempty"`
	// PIDs are the node's processes, kube-proxy last.
	PIDs    []int          `json:"pids"`
	Outside []*outsidePath `json:"outside"`
	// Bridge: the node created the pods' bridge, which did not exist
	// before; only then does teardown delete it.
	Bridge bool `json:"bridge,omitempty"`
	// Kubepods: no kubepods cgroup existed when the node started
	// (checkNoKubepods, under the machine lock), so those there now are
	// its kubelet's; only then does teardown kill the processes in them
	// and remove them.
	Kubepods bool `json:"kubepods,omitempty"`
	// ControlPlane are the owner's etcd and kube-apiserver, children of
	// it when the node started. They outlive an owner that is killed
	// (envtest starts them without a parent-death signal), and a later
	// RecoverLeftovers ends them.
	ControlPlane []proc `json:"controlPlane,omitempty"`
	// Proxy is the kube-proxy binary, once the node started it: no
	// kube-proxy chains existed before (checkNoProxyRules, under the
	// machine lock), so those there now are its own, and teardown removes
	// them once the process is gone (cleanUpProxy).
	Proxy string `json:"proxy,omitempty"`
	// ProxyFirewall are the IP families whose filter table had no chain
	// KUBE-FIREWALL when kube-proxy started: kube-proxy creates it there,
	// and teardown removes it.
	ProxyFirewall []string `json:"proxyFirewall,omitempty"`
}

const (
	stateFile = "state.json"
	// dirPattern names the node folders in the temporary folder.
	dirPattern = "ssnode-"
)

func (n *Node) saveState() error {
	data, err := json.Marshal(n.state)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.dir, stateFile), data, 0o600); err != nil {
		return fmt.Errorf("record the node's state: %w", err)
	}
	return nil
}

// start starts one of the node's processes and records its PID.
func (n *Node) start(name, bin string, args ...string) (*process, error) {
	p, err := startProcess(n.out, name, bin, args...)
	if err != nil {
		return nil, err
	}
	n.state.PIDs = append(n.state.PIDs, p.cmd.Process.Pid)
	return p, n.saveState()
}

// New prepares a node before its control plane starts: it installs the
// packages when missing, creates the pods' bridge with APIServerAddress on
// it (the apiserver listens there), starts containerd and imports the
// images. Join then starts the kubelet, kube-scheduler and kube-proxy
// against the apiserver. Stop it with Stop, also when New or Join failed.
func New(ctx context.Context, opts Options) (_ *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a real node needs root (containerd, runc, mounts, cgroups, iptables): run `make e2e` as root")
	}
	if err := acquire(ctx, opts.Output); err != nil {
		return nil, err
	}
	// Held until Stop; given back here if New fails.
	defer func() {
		if err != nil {
			release()
		}
	}()
	for _, bin := range []string{"kubelet", "kube-scheduler", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(opts.Assets, bin)); err != nil {
			return nil, fmt.Errorf("no %s in %s (run `hack/control-plane.sh kubelet`): %w", bin, opts.Assets, err)
		}
	}
	if err := RecoverLeftovers(); err != nil {
		return nil, err
	}
	if err := checkNoKubepods(); err != nil {
		return nil, err
	}
	if err := checkNoProxyRules(ctx); err != nil {
		return nil, err
	}
	if _, err := os.Stat("/sys/class/net/" + bridgeName); err == nil {
		return nil, fmt.Errorf("network interface %s exists: another node uses it, or one left it behind (`ip link delete %s` once no node runs)", bridgeName, bridgeName)
	}
	if err := EnsurePackages(ctx, opts.Output); err != nil {
		return nil, err
	}
	// A short folder: containerd's socket path must stay within 108 bytes.
	dir, err := os.MkdirTemp("", dirPattern)
	if err != nil {
		return nil, err
	}
	owner, err := self()
	if err != nil {
		return nil, err
	}
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	n := &Node{dir: dir, assets: opts.Assets, out: out, state: state{
		Owner:      owner.PID,
		OwnerStart: owner.Start,
		Outside:    watchOutside(),
		Kubepods:   true,
	}}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Stop())
		}
	}()
	if err := n.saveState(); err != nil {
		return nil, err
	}
	for _, d := range []string{"containerd", "cni/net.d", "cni/ipam", "kubelet/pki", "pod-logs", "runc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	files := map[string]string{
		"containerd/config.toml":       containerdConfig(dir),
		"cni/net.d/10-bridge.conflist": cniConfig(dir),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	if err := n.addBridge(ctx); err != nil {
		return nil, err
	}
	if n.containerd, err = n.start("containerd", "containerd", "--config", filepath.Join(dir, "containerd", "config.toml")); err != nil {
		return nil, err
	}
	if err := n.waitContainerd(ctx); err != nil {
		return nil, err
	}
	n.ImageIDs, n.Digests = map[string]string{}, map[string]string{}
	if err := n.Import(ctx, append([]Image{{Ref: pauseRef, Version: "pause"}}, opts.Images...)...); err != nil {
		return nil, err
	}
	n.locked = true
	return n, nil
}

// Join starts the kubelet, kube-scheduler and kube-proxy against the
// apiserver kubeconfig reaches, and returns once the node is Ready and
// kube-proxy has written its rules. The control plane runs by now: Join
// records its processes, which a later RecoverLeftovers ends should this
// process be killed.
func (n *Node) Join(ctx context.Context, kubeconfig []byte) error {
	restCfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return fmt.Errorf("read the kubeconfig: %w", err)
	}
	if n.client, err = kubernetes.NewForConfig(restCfg); err != nil {
		return fmt.Errorf("client for the apiserver: %w", err)
	}
	n.state.ControlPlane = controlPlaneChildren()
	if err := n.saveState(); err != nil {
		return err
	}
	kc := filepath.Join(n.dir, "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		return err
	}
	ports := make([]int, 5)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return err
		}
	}
	kubeletPort, kubeletHealthz, schedulerPort, proxyHealthz, proxyMetrics := ports[0], ports[1], ports[2], ports[3], ports[4]
	configs := map[string]string{
		"kubelet/config.yaml": kubeletConfig(n.dir, kubeletPort, kubeletHealthz),
		"kube-proxy.yaml":     proxyConfig(kc, proxyHealthz, proxyMetrics),
	}
	for name, content := range configs {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	n.kubelet, err = n.start("kubelet", filepath.Join(n.assets, "kubelet"),
		"--config="+filepath.Join(n.dir, "kubelet", "config.yaml"),
		"--kubeconfig="+kc,
		"--hostname-override="+NodeName,
		"--root-dir="+filepath.Join(n.dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.dir, "kubelet", "pki"),
	)
	if err != nil {
		return err
	}
	n.scheduler, err = n.start("kube-scheduler", filepath.Join(n.assets, "kube-scheduler"),
		"--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc,
		"--authorization-kubeconfig="+kc,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", schedulerPort),
	)
	if err != nil {
		return err
	}
	// Recorded before it starts: its rules may be written as soon as it
	// runs.
	n.state.Proxy = filepath.Join(n.assets, "kube-proxy")
	if n.state.ProxyFirewall, err = withoutFirewall(ctx); err != nil {
		return err
	}
	if err := n.saveState(); err != nil {
		return err
	}
	n.proxy, err = n.start("kube-proxy", n.state.Proxy, "--config="+filepath.Join(n.dir, "kube-proxy.yaml"))
	if err != nil {
		return err
	}
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	return n.waitProxy(ctx, proxyHealthz)
}

// Import builds images and imports them; an image already on the node under
// the same reference is re-pointed to the new content, as after a re-push
// and a new pull. ImageIDs and Digests follow. The first image with
// Exporter set builds the exporter, into the node's folder.
func (n *Node) Import(ctx context.Context, images ...Image) error {
	tar, err := os.CreateTemp(n.dir, "images-*.tar")
	if err != nil {
		return err
	}
	tar.Close()
	defer os.Remove(tar.Name())
	if slices.ContainsFunc(images, func(im Image) bool { return im.Exporter }) && n.exporterBin == "" {
		bin := filepath.Join(n.dir, "exporter")
		if err := buildExporter(ctx, bin); err != nil {
			return err
		}
		n.exporterBin = bin
	}
	ids, digests, err := buildImages(busyboxPath, n.exporterBin, images, tar.Name())
	if err != nil {
		return err
	}
	if err := n.ctr(ctx, "-n", "k8s.io", "images", "import", tar.Name()); err != nil {
		return fmt.Errorf("import images: %w", err)
	}
	maps.Copy(n.ImageIDs, ids)
	maps.Copy(n.Digests, digests)
	return nil
}

// ImportArchive imports the images of an OCI image-layout tarball, named by
// its index's io.containerd.image.name annotations (what `ctr images
// import` reads), such as a release image built for the node.
func (n *Node) ImportArchive(ctx context.Context, path string) error {
	if err := n.ctr(ctx, "-n", "k8s.io", "images", "import", path); err != nil {
		return fmt.Errorf("import images from %s: %w", path, err)
	}
	return nil
}

// KillContainer kills a running container with SIGKILL through
// containerd, as a crash would end it: containerID is a container status's
// containerID ("containerd://<id>"). The kubelet then restarts it as the
// pod's restartPolicy says.
func (n *Node) KillContainer(ctx context.Context, containerID string) error {
	id, ok := strings.CutPrefix(containerID, "containerd://")
	if !ok || id == "" {
		return fmt.Errorf("container ID %q: want containerd://<id>", containerID)
	}
	if err := n.ctr(ctx, "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id); err != nil {
		return fmt.Errorf("kill container %s: %w", id, err)
	}
	return nil
}

// EnsurePackages installs the Debian packages the node runs on that are
// missing; Start calls it. Call it first to take HostState after what the
// installation itself leaves (a started service, its folders).
func EnsurePackages(ctx context.Context, out io.Writer) error {
	var missing []string
	for _, p := range packages {
		status, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", p).Output()
		if err != nil || !strings.Contains(string(status), "install ok installed") {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if out == nil {
		out = io.Discard
	}
	fmt.Fprintf(out, "[realnode] installing %s\n", strings.Join(missing, " "))
	for _, args := range [][]string{{"update"}, append([]string{"install", "-y", "--no-install-recommends"}, missing...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", args[0], err)
		}
	}
	return nil
}

// addBridge makes the pods' bridge before the CNI plugin would, with the
// node's address on the pods' subnet: the apiserver listens there
// (APIServerAddress), and the kubelet's HTTP and TCP probes, the
// apiserver's pod proxy and its webhook calls reach the pods over it.
// Without an address there, connections to pod IPs follow the default
// route off the machine. Once it exists the node's state says it made it,
// and Stop deletes it.
func (n *Node) addBridge(ctx context.Context) error {
	for i, args := range [][]string{
		{"link", "add", "name", bridgeName, "type", "bridge"},
		{"addr", "add", bridgeAddress, "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("set up the pods' bridge %s: ip %s: %w: %s", bridgeName, strings.Join(args, " "), err, out)
		}
		if i == 0 {
			n.state.Bridge = true
			if err := n.saveState(); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkNoKubepods refuses to start beside another kubelet, or over what a
// node left behind: their pods' cgroups would be taken for this node's.
func checkNoKubepods() error {
	dirs, err := kubepodsCgroups()
	if err != nil {
		return err
	}
	if len(dirs) > 0 {
		return fmt.Errorf("cgroup %s exists: another kubelet runs on this machine, or one left it behind", dirs[0])
	}
	return nil
}

func (n *Node) ctr(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", containerdSocket(n.dir)}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (n *Node) waitContainerd(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if n.containerd.hasExited() {
			return false, fmt.Errorf("containerd exited: %w", cmp.Or(n.containerd.err, errExitedCleanly))
		}
		return n.ctr(ctx, "version") == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for containerd: %w", err)
	}
	return nil
}

func (n *Node) waitReady(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if n.kubelet.hasExited() {
			return false, fmt.Errorf("kubelet exited: %w", cmp.Or(n.kubelet.err, errExitedCleanly))
		}
		node, err := n.client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not yet: the poll tries again
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("wait for node %s to be Ready: %w", NodeName, err)
	}
	return nil
}

// Leave stops what depends on the apiserver: kube-scheduler, then the
// node's pods (deleted, and stopped by the kubelet), the kubelet and
// kube-proxy. A control plane that listens on the node's address
// (APIServerAddress) stops after Leave and before Stop, which deletes that
// address with the bridge. Calling it again does nothing.
func (n *Node) Leave() error {
	var err error
	n.scheduler.stop(10 * time.Second)
	if n.kubelet != nil && !n.kubelet.hasExited() {
		err = n.deletePods()
	}
	n.kubelet.stop(10 * time.Second)
	n.proxy.stop(10 * time.Second)
	return err
}

// Stop leaves (Leave, if not done yet), kills what is left in the pods'
// cgroups, stops containerd and its shims, removes kube-proxy's rules,
// unmounts and removes everything the node created, the bridge included,
// and only that.
func (n *Node) Stop() error {
	errs := []error{n.Leave()}
	if n.state.Kubepods {
		errs = append(errs, killKubepods())
	}
	n.containerd.stop(10 * time.Second)
	errs = append(errs, cleanUp(n.dir, n.state))
	if n.locked {
		n.locked = false
		release()
	}
	return errors.Join(errs...)
}

// deletePods deletes the pods bound to the node and waits until the kubelet
// has stopped them, so that it tears their sandboxes and networks down.
func (n *Node) deletePods() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sel := fields.OneTermEqualSelector("spec.nodeName", NodeName).String()
	pods, err := n.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return fmt.Errorf("list the node's pods: %w", err)
	}
	grace := int64(1)
	for _, p := range pods.Items {
		err := n.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && !strings.Contains(err.Error(), "not found") {
			return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := n.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the node's pods to be gone: %w", err)
	}
	return nil
}
