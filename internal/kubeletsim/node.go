package kubeletsim

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// SimulatedNodeLabel marks the nodes a Sim registers.
const SimulatedNodeLabel = "sidecarset.dev/simulated-node"

// The kubelet's lease: 40 s long, renewed every quarter of that.
const (
	leaseNamespace     = corev1.NamespaceNodeLease
	leaseDuration      = 40
	leaseRenewInterval = 10 * time.Second
)

// simNode is one simulated node: its kubelet, container runtime and images.
type simNode struct {
	name     string
	ip       string
	labels   map[string]string
	uid      types.UID
	m        *machine
	recorder record.EventRecorder
}

func newSimNode(name string, index int, reg *registry, t timing) *simNode {
	return &simNode{
		name: name,
		ip:   nodeIP(index),
		labels: map[string]string{
			corev1.LabelHostname:   name,
			corev1.LabelOSStable:   "linux",
			corev1.LabelArchStable: runtime.GOARCH,
			SimulatedNodeLabel:     "true",
		},
		m: &machine{timing: t, reg: reg, images: newNodeImages(), newID: newContainerID},
	}
}

// nodeIP is node index's address: on loopback (127.0.10.1, ...), so that
// the apiserver, should it reach for a kubelet (logs, exec), is refused on
// this machine and never sends anything off it.
func nodeIP(index int) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 0x7f000a01+uint32(index))
	return netip.AddrFrom4(b).String()
}

func (n *simNode) recordEvent(pod *corev1.Pod, e event) {
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	if e.init {
		ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", e.container)
	} else {
		ref.FieldPath = fmt.Sprintf("spec.containers{%s}", e.container)
	}
	typ := corev1.EventTypeNormal
	if e.warning {
		typ = corev1.EventTypeWarning
	}
	n.recorder.Event(ref, typ, e.reason, e.message)
}

// node returns the Node object the kubelet registers: Ready, and with room
// for thousands of pods.
func (n *simNode) node(kubeletVersion string) *corev1.Node {
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("1000"),
		corev1.ResourceMemory:           resource.MustParse("4Ti"),
		corev1.ResourcePods:             resource.MustParse("1100"),
		corev1.ResourceEphemeralStorage: resource.MustParse("10Ti"),
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.labels},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			// No Hostname address: the apiserver would look the name up in DNS.
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:          kubeletVersion,
				ContainerRuntimeVersion: "containerd://1.6.20",
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
				OSImage:                 "kubeletsim",
			},
		},
	}
	return node
}

// registerNodes creates the Node objects, or marks them Ready again if a
// previous simulator left them, and takes their leases.
func (s *Sim) registerNodes(ctx context.Context) error {
	version, err := s.client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("kubeletsim: apiserver version: %w", err)
	}
	for _, n := range s.nodes {
		want := n.node(version.GitVersion)
		got, err := s.client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = s.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if err == nil {
				got.Status = want.Status
				got, err = s.client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("kubeletsim: register node %s: %w", n.name, err)
		}
		n.uid = got.UID
		if err := s.renewLease(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// renewLeases renews every node's lease until ctx is done, so that the node
// lifecycle controller, if it runs, sees live nodes.
func (s *Sim) renewLeases(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for _, n := range s.nodes {
			if err := s.renewLease(ctx, n); err != nil && ctx.Err() == nil {
				ctrllog.FromContext(ctx).Error(err, "Lease not renewed", "node", n.name)
			}
		}
	}, leaseRenewInterval)
}

func (s *Sim) renewLease(ctx context.Context, n *simNode) error {
	leases := s.client.CoordinationV1().Leases(leaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:      n.name,
				Namespace: leaseNamespace,
				// As the kubelet does, so the lease goes with its node.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.name, UID: n.uid}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(n.name),
				LeaseDurationSeconds: ptr.To[int32](leaseDuration),
				RenewTime:            &now,
			},
		}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
	case err == nil:
		lease.Spec.RenewTime = &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("kubeletsim: renew lease of node %s: %w", n.name, err)
	}
	return nil
}
