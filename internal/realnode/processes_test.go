package realnode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestShimArgs(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		args                   []string
		address, namespace, id string
	}{
		{
			name:    "flags with their values apart, as containerd starts a shim",
			args:    []string{"-namespace", "k8s.io", "-id", "abc", "-address", "/tmp/ssnode-1/containerd/containerd.sock"},
			address: "/tmp/ssnode-1/containerd/containerd.sock", namespace: "k8s.io", id: "abc",
		},
		{
			name:    "flags with =, a boolean flag between",
			args:    []string{"--namespace=default", "-debug", "-id=x1", "-address=/run/containerd/containerd.sock"},
			address: "/run/containerd/containerd.sock", namespace: "default", id: "x1",
		},
		{
			name: "no flags",
			args: []string{"start"},
		},
	} {
		address, namespace, id := shimArgs(tc.args)
		if address != tc.address || namespace != tc.namespace || id != tc.id {
			t.Errorf("%s: got address %q, namespace %q, id %q; want %q, %q, %q", tc.name, address, namespace, id, tc.address, tc.namespace, tc.id)
		}
	}
}

func TestShimSocket(t *testing.T) {
	// printf %s /tmp/ssnode-1/containerd/containerd.sock/k8s.io/abc | sha256sum
	want := "/run/containerd/s/336ede0d0a726af0a2e3f188946fb1e298452786797d97a4770618adb594cab2"
	if got := shimSocket("/tmp/ssnode-1/containerd/containerd.sock", "k8s.io", "abc"); got != want {
		t.Errorf("shimSocket = %s, want %s", got, want)
	}
}

func TestBundleSockets(t *testing.T) {
	dir := t.TempDir()
	tasks := filepath.Join(dir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io")
	for id, address := range map[string]string{
		"a": "unix:///run/containerd/s/0123abcd",
		"b": "unix:///elsewhere/s/4567",
		"c": "",
	} {
		if err := os.MkdirAll(filepath.Join(tasks, id), 0o700); err != nil {
			t.Fatal(err)
		}
		if address != "" {
			if err := os.WriteFile(filepath.Join(tasks, id, "address"), []byte(address), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if diff := cmp.Diff([]string{"/run/containerd/s/0123abcd"}, bundleSockets(dir)); diff != "" {
		t.Errorf("bundle sockets (-want +got):\n%s", diff)
	}
}
