package realnode

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRecoverLeftovers: what nodes left in the temporary folder is torn
// down as their state files say, and nothing else is touched. A folder
// without a state file goes only when nothing uses it; a recorded process
// is ended only while it is the one recorded (same PID and start time);
// a node whose owner still runs is refused.
func TestRecoverLeftovers(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	saved := lockPath
	lockPath = filepath.Join(t.TempDir(), "node.lock")
	t.Cleanup(func() { lockPath = saved })

	// A dead owner: a process that ran and was waited for. It runs until
	// killed, so that its start time is read before it ends.
	done := sleeper(t)
	_, deadStart, err := procStat(done.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := done.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = done.Wait()
	recorded, other := sleeper(t), sleeper(t)
	_, otherStart, err := procStat(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	cpDir := filepath.Join(tmp, "k8s_test_framework_1")
	mkdir(t, cpDir)

	mkdir(t, filepath.Join(tmp, "ssnode-unused", "kubelet"))
	mkdir(t, filepath.Join(tmp, "ssnode-in-use"))
	held, err := os.Create(filepath.Join(tmp, "ssnode-in-use", "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	writeState(t, filepath.Join(tmp, "ssnode-dead"), state{
		Owner: done.Process.Pid, OwnerStart: deadStart,
		ControlPlane: []proc{
			procOf(t, recorded.Process.Pid, cpDir),
			// A PID the record names, started at another time: not it.
			{PID: other.Process.Pid, Start: otherStart + 1, Name: "etcd"},
		},
	})

	if err := RecoverLeftovers(); err != nil {
		t.Fatal(err)
	}
	if err := recorded.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the recorded control-plane process ended with %v, want killed", err)
	}
	if !(proc{PID: other.Process.Pid, Start: otherStart}).alive() {
		t.Error("a process whose start time differs from the record was killed")
	}
	wantLeft := []string{"ssnode-in-use"}
	if diff := cmp.Diff(wantLeft, dirNames(tmp)); diff != "" {
		t.Errorf("left in the temporary folder (-want +got):\n%s", diff)
	}

	// A node whose owner runs: this test's parent.
	_, start, err := procStat(os.Getppid())
	if err != nil {
		t.Fatal(err)
	}
	writeState(t, filepath.Join(tmp, "ssnode-live"), state{Owner: os.Getppid(), OwnerStart: start})
	if err := RecoverLeftovers(); err == nil || !strings.Contains(err.Error(), "runs a real node") {
		t.Errorf("RecoverLeftovers beside a live node = %v, want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "ssnode-live", stateFile)); err != nil {
		t.Errorf("the live node's folder was touched: %v", err)
	}
}

// TestEnvtestDirs picks envtest's own folders from control-plane command
// lines, and nothing else.
func TestEnvtestDirs(t *testing.T) {
	t.Setenv("TMPDIR", "/tmp")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"etcd", []string{"etcd", "--data-dir=/tmp/k8s_test_framework_1", "--listen-peer-urls=http://127.0.0.1:1"}, []string{"/tmp/k8s_test_framework_1"}},
		{"apiserver, flag and value apart", []string{"kube-apiserver", "--cert-dir", "/tmp/k8s_test_framework_2"}, []string{"/tmp/k8s_test_framework_2"}},
		{"both flags, one folder", []string{"x", "--cert-dir=/tmp/k8s_test_framework_3", "--data-dir=/tmp/k8s_test_framework_3"}, []string{"/tmp/k8s_test_framework_3"}},
		{"a folder of someone else", []string{"etcd", "--data-dir=/var/lib/etcd"}, nil},
		{"apiserver serving a real node", []string{"kube-apiserver", "--cert-dir=/tmp/sidecarset-testenv-5"}, []string{"/tmp/sidecarset-testenv-5"}},
		{"deeper than the temporary folder", []string{"etcd", "--data-dir=/tmp/x/k8s_test_framework_4"}, nil},
		{"another name", []string{"etcd", "--data-dir=/tmp/etcd-data"}, nil},
		{"a flag without value", []string{"etcd", "--data-dir"}, nil},
	} {
		if diff := cmp.Diff(tc.want, envtestDirs(tc.args)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestProcStat reads this process's parent and tells it from a process
// given its PID later.
func TestProcStat(t *testing.T) {
	ppid, start, err := procStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if ppid != os.Getppid() {
		t.Errorf("parent = %d, want %d", ppid, os.Getppid())
	}
	me, err := self()
	if diff := cmp.Diff(proc{PID: os.Getpid(), Start: start}, me); err != nil || diff != "" {
		t.Errorf("self() = %v, (-want +got):\n%s", err, diff)
	}
	if !me.alive() {
		t.Error("this process is not alive")
	}
	if (proc{PID: os.Getpid(), Start: start + 1}).alive() {
		t.Error("a process started at another time is taken for this one")
	}
}

func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func procOf(t *testing.T, pid int, dirs ...string) proc {
	t.Helper()
	_, start, err := procStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return proc{PID: pid, Start: start, Name: "kube-apiserver", Dirs: dirs}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func writeState(t *testing.T, dir string, st state) {
	t.Helper()
	mkdir(t, dir)
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
}
