// Package realnode runs a real node against a testenv control plane: the
// kubelet v1.37.2 that `hack/control-plane.sh kubelet` builds, containerd,
// runc and the CNI bridge plugin from Debian, and test images built locally
// (busybox, and with it the exporter of test/images/exporter).
// Everything it runs lives in one folder of its own; Stop ends its processes
// by PID, unmounts what they mounted and removes what they created. It needs
// root and a Debian machine.
package realnode

import (
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

// APIServerFlags are the kube-apiserver flags a real node needs (see
// testenv.Options.APIServerFlags).
func APIServerFlags() map[string]string {
	return map[string]string{
		"kubelet-preferred-address-types": "Hostname",
		// Loopback is not allowed as an endpoint address: without this
		// the apiserver advertising 127.0.0.1 exits.
		"endpoint-reconciler-type": "none",
	}
}

// packages are the Debian packages the node runs on.
var packages = []string{"containerd", "runc", "containernetworking-plugins", "busybox-static"}

// Options says what the node runs and how it reaches the apiserver.
type Options struct {
	// Assets is the folder with the kubelet binary (KUBEBUILDER_ASSETS).
	Assets string
	// KubeConfig reaches the apiserver; the kubelet registers with it.
	KubeConfig []byte
	// Images are built and imported before the kubelet starts.
	Images []Image
	// Output receives containerd's and the kubelet's logs; nil discards them.
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
	client     kubernetes.Interface
	containerd *process
	kubelet    *process
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
	// PIDs are the node's processes, kubelet last.
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
func (n *Node) start(out io.Writer, name, bin string, args ...string) (*process, error) {
	p, err := startProcess(out, name, bin, args...)
	if err != nil {
		return nil, err
	}
	n.state.PIDs = append(n.state.PIDs, p.cmd.Process.Pid)
	return p, n.saveState()
}

// Start installs the packages when missing, builds and imports the images,
// and starts containerd and the kubelet; it returns once the node is Ready.
// Stop it with Stop, also when Start failed.
func Start(ctx context.Context, opts Options) (_ *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a real node needs root (containerd, runc, mounts, cgroups): run `make e2e` as root")
	}
	if err := acquire(ctx, opts.Output); err != nil {
		return nil, err
	}
	// Held until Stop; given back here if Start fails.
	defer func() {
		if err != nil {
			release()
		}
	}()
	kubelet := filepath.Join(opts.Assets, "kubelet")
	if _, err := os.Stat(kubelet); err != nil {
		return nil, fmt.Errorf("no kubelet in %s (run `hack/control-plane.sh kubelet`): %w", opts.Assets, err)
	}
	if err := RecoverLeftovers(); err != nil {
		return nil, err
	}
	if err := checkNoKubepods(); err != nil {
		return nil, err
	}
	if _, err := os.Stat("/sys/class/net/" + bridgeName); err == nil {
		return nil, fmt.Errorf("network interface %s exists: another node uses it, or one left it behind (`ip link delete %s` once no node runs)", bridgeName, bridgeName)
	}
	if err := EnsurePackages(ctx, opts.Output); err != nil {
		return nil, err
	}
	restCfg, err := clientcmd.RESTConfigFromKubeConfig(opts.KubeConfig)
	if err != nil {
		return nil, fmt.Errorf("read the kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("client for the apiserver: %w", err)
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
	n := &Node{dir: dir, client: cs, state: state{
		Owner:        owner.PID,
		OwnerStart:   owner.Start,
		Outside:      watchOutside(),
		Kubepods:     true,
		ControlPlane: controlPlaneChildren(),
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
		"kubelet/kubeconfig":           string(opts.KubeConfig),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	if err := n.addBridge(ctx); err != nil {
		return nil, err
	}

	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	if n.containerd, err = n.start(out, "containerd", "containerd", "--config", filepath.Join(dir, "containerd", "config.toml")); err != nil {
		return nil, err
	}
	if err := n.waitContainerd(ctx); err != nil {
		return nil, err
	}
	n.ImageIDs, n.Digests = map[string]string{}, map[string]string{}
	if err := n.Import(ctx, append([]Image{{Ref: pauseRef, Version: "pause"}}, opts.Images...)...); err != nil {
		return nil, err
	}

	port, err := freePort()
	if err != nil {
		return nil, err
	}
	healthz, err := freePort()
	if err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "kubelet", "config.yaml")
	if err := os.WriteFile(config, []byte(kubeletConfig(dir, port, healthz)), 0o600); err != nil {
		return nil, err
	}
	n.kubelet, err = n.start(out, "kubelet", kubelet,
		"--config="+config,
		"--kubeconfig="+filepath.Join(dir, "kubelet", "kubeconfig"),
		"--hostname-override="+NodeName,
		"--root-dir="+filepath.Join(dir, "kubelet"),
		"--cert-dir="+filepath.Join(dir, "kubelet", "pki"),
	)
	if err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	n.locked = true
	return n, nil
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
// node's address on the pods' subnet, so that the kubelet's HTTP and TCP
// probes and the apiserver's pod proxy reach the pods on it. Without an
// address there, connections to pod IPs follow the default route off the
// machine. The pods still get no default route (isGateway false) and the
// node forwards nothing for them. Once it exists the node's state says it
// made it, and Stop deletes it.
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
			return false, fmt.Errorf("containerd exited: %v", n.containerd.err)
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
			return false, fmt.Errorf("kubelet exited: %v", n.kubelet.err)
		}
		node, err := n.client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
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

// Stop deletes the node's pods, stops the kubelet, kills what is left in
// the pods' cgroups, stops containerd and its shims, unmounts and removes
// everything the node created, and only that. Stop it before the
// apiserver.
func (n *Node) Stop() error {
	var errs []error
	if n.kubelet != nil && !n.kubelet.hasExited() {
		errs = append(errs, n.deletePods())
	}
	n.kubelet.stop(10 * time.Second)
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
