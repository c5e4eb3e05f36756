package realnode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecarset/sidecarset/internal/testenv"
)

// killedChildEnv makes the test binary the child of TestKilledNodeRecovers.
const killedChildEnv = "SIDECARSET_REALNODE_KILLED_CHILD"

// TestKilledNodeRecovers starts a control plane and a node running a pod
// in a child process, SIGKILLs the child, and checks that the kubelet,
// kube-scheduler, kube-proxy and containerd died with it and that
// RecoverLeftovers then leaves the machine as it was before (HostState:
// kube-proxy's iptables rules gone too) and ends the child's etcd and
// kube-apiserver. It runs a real node: only with SIDECARSET_NODES=real
// (the variable `make e2e` sets for the real-node suites), as root.
func TestKilledNodeRecovers(t *testing.T) {
	if os.Getenv(killedChildEnv) != "" {
		runKilledChild(t)
		return
	}
	if os.Getenv("SIDECARSET_NODES") != "real" || os.Geteuid() != 0 {
		t.Skip("runs a real node: set SIDECARSET_NODES=real and run as root")
	}
	if _, err := testenv.Assets(); err != nil {
		t.Fatal(err)
	}
	if err := EnsurePackages(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := RecoverLeftovers(); err != nil {
		t.Fatal(err)
	}
	before := HostState()

	child := exec.Command(os.Args[0], "-test.run=^TestKilledNodeRecovers$", "-test.timeout=3m")
	child.Env = append(os.Environ(), killedChildEnv+"=1")
	var logs strings.Builder
	child.Stderr = &logs
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = child.Process.Kill()
		_ = child.Wait()
		if t.Failed() {
			t.Logf("the child's output:\n%s", logs.String())
		}
	}()
	dir, err := readyDir(out)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	var names []string
	dirs := 0
	for _, p := range st.ControlPlane {
		names = append(names, p.Name)
		dirs += len(p.Dirs)
	}
	if dirs != 2 {
		t.Errorf("the node recorded %d folders of the control plane, want etcd's data and the apiserver's certificates: %+v", dirs, st.ControlPlane)
	}
	if diff := cmp.Diff([]string{"kube-apiserver", "etcd"}, names); diff != "" {
		t.Errorf("the node recorded its owner's control plane (-want +got):\n%s", diff)
	}
	if !st.Bridge || !st.Kubepods || st.Proxy == "" {
		t.Errorf("the node recorded bridge %v, kubepods %v, kube-proxy %q; want it to own all three", st.Bridge, st.Kubepods, st.Proxy)
	}
	if checkNoProxyRules(context.Background()) == nil {
		t.Error("no kube-proxy chains while the node runs: the check that recovery removes kube-proxy's rules would prove nothing")
	}
	if diff := cmp.Diff(before, HostState()); diff == "" {
		t.Fatal("the running node shows nothing on the machine: the comparison after recovery would prove nothing")
	}

	start := time.Now()
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	for _, pid := range st.PIDs {
		for syscall.Kill(pid, 0) == nil && time.Since(start) < 5*time.Second {
			time.Sleep(20 * time.Millisecond)
		}
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(cmdline), dir) {
			t.Errorf("process %d of the node outlived the killed child: %s", pid, cmdline)
		}
	}
	var survivors []string
	for _, p := range st.ControlPlane {
		if p.alive() {
			survivors = append(survivors, p.Name)
		}
	}
	t.Logf("%v after the kill: the node's processes are gone; of the control plane, %v still run", time.Since(start).Round(time.Millisecond), survivors)

	start = time.Now()
	if err := RecoverLeftovers(); err != nil {
		t.Fatal(err)
	}
	t.Logf("recovered in %v", time.Since(start).Round(time.Millisecond))
	if diff := cmp.Diff(before, HostState()); diff != "" {
		t.Errorf("left on the machine after RecoverLeftovers (-before +after):\n%s", diff)
	}
	for _, p := range st.ControlPlane {
		if p.alive() {
			t.Errorf("%s (PID %d) still runs after RecoverLeftovers", p.Name, p.PID)
		}
		for _, d := range p.Dirs {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("folder %s of %s is left", d, p.Name)
			}
		}
	}
}

// readyDir reads the child's output until it says its node is ready, in
// which folder.
func readyDir(out io.Reader) (string, error) {
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if dir, ok := strings.CutPrefix(lines.Text(), "ready "); ok {
			return dir, nil
		}
	}
	if err := lines.Err(); err != nil {
		return "", fmt.Errorf("read the child's output: %w", err)
	}
	return "", errors.New("the child exited before its node was ready")
}

// runKilledChild starts a control plane, a node and a pod on it, says
// where the node runs, and waits to be killed.
func runKilledChild(t *testing.T) {
	testenv.SetLogger()
	ctx := context.Background()
	assets, err := testenv.Assets()
	if err != nil {
		t.Fatal(err)
	}
	const image = "sidecarset.test/busybox:v1"
	node, err := New(ctx, Options{Assets: assets, Images: []Image{{Ref: image, Version: "v1"}}, Output: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	env, err := testenv.Start(testenv.Options{APIServerFlags: APIServerFlags(), ServingAddress: APIServerAddress})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// No kube-controller-manager makes it: pods are refused without it.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := node.Join(ctx, env.KubeConfig); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "left-behind", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}},
	}
	FitPod(&pod.Spec)
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("wait for pod %s to run: %v", pod.Name, err)
	}
	fmt.Println("ready", node.dir)
	select {}
}
