package realnode

import (
	"fmt"
	"path/filepath"

	"github.com/sidecarset/sidecarset/internal/testenv"
)

// bridgeName and podSubnet are the CNI bridge and its private range. The
// node holds bridgeAddress on the bridge (see addBridge), host-local keeps
// it out of the pods' addresses, and the pods get one route beyond their
// subnet: the Service range, through the node, where kube-proxy's rules
// rewrite a ClusterIP to its endpoint. They get no default route and the
// node neither forwards nor masquerades for them (isGateway would switch
// on IP forwarding for the whole machine), so no traffic leaves it.
const (
	bridgeName    = "sscni0"
	podSubnet     = "10.88.77.0/24"
	bridgeIP      = "10.88.77.1"
	bridgeAddress = bridgeIP + "/24"
)

// containerdConfig gives containerd its own root, state, socket, runc root
// and CNI configuration, so nothing collides with another containerd.
func containerdConfig(dir string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
# Its folder is fixed (/opt/containerd) and nothing here uses it.
disabled_plugins = ["io.containerd.internal.v1.opt"]

[grpc]
  address = %[3]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[4]q
  # The kubelet asks for oom_score_adj -998, which root without
  # CAP_SYS_RESOURCE may not set: runc would fail every sandbox.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[5]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
`, filepath.Join(dir, "containerd", "root"), filepath.Join(dir, "containerd", "state"),
		containerdSocket(dir), pauseRef, filepath.Join(dir, "runc"), filepath.Join(dir, "cni", "net.d"))
}

func containerdSocket(dir string) string { return filepath.Join(dir, "containerd", "containerd.sock") }

// cniConfig is a bridge network with host-local addresses kept in dir, and
// a route to the Service range through the node.
func cniConfig(dir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "sidecarset-e2e",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": false,
    "ipMasq": false,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": %q, "gw": %q}],
      "dataDir": %q
    }
  }]
}
`, bridgeName, podSubnet, bridgeIP, testenv.ServiceIPRange, bridgeIP, filepath.Join(dir, "cni", "ipam"))
}

// kubeletConfig holds the settings without which the kubelet does not run
// here: cgroup v1 allowed, cgroupfs, no swap check, no DNS, loopback only,
// image GC off in effect (imported images must never be collected), and
// eviction thresholds low enough for a busy disk. It makes no iptables
// chains (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY, KUBE-FIREWALL with its
// DROP rule): it would never remove them from the machine.
func kubeletConfig(dir string, port, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
makeIPTablesUtilChains: false
resolvConf: ""
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
# The apiserver reaches the kubelet without a client certificate, for logs
# and exec; the kubelet listens on loopback only.
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
`, port, healthzPort, containerdSocket(dir), filepath.Join(dir, "pod-logs"))
}
