package inject_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// benchCluster returns a namespace, a 5-container pod and 20 SidecarSets of
// which the first matching select the pod. Each set declares a regular
// sidecar with resources, a native sidecar, a volume and a pull secret; every
// other set has a namespaceSelector, so both kinds of matching are measured.
func benchCluster(matching int) (*corev1.Namespace, *corev1.Pod, []*v1alpha1.SidecarSet) {
	ns := testutil.Namespace("shop", map[string]string{"team": "data"})
	pb := testutil.Pod("shop", "db-0").Labels(map[string]string{"app": "db", "tier": "backend"})
	for i := range 5 {
		pb.Containers(testutil.Container(fmt.Sprintf("app-%d", i), "registry.example/app@sha256:0123").
			Requests("100m", "128Mi").Limits("100m", "128Mi").VolumeMount("data", "/data").Obj())
	}
	pod := pb.Volumes(testutil.EmptyDirVolume("data")).Obj()

	sets := make([]*v1alpha1.SidecarSet, 20)
	for i := range sets {
		name := fmt.Sprintf("set-%02d", i)
		app := "db"
		if i >= matching {
			app = fmt.Sprintf("other-%d", i)
		}
		b := testutil.SidecarSet(name).
			Selector(map[string]string{"app": app, "tier": "backend"}).
			Containers(testutil.Container(name+"-agent", "registry.example/agent@sha256:4567").
				Requests("10m", "16Mi").Limits("10m", "16Mi").VolumeMount(name+"-run", "/run/agent").
				Sidecar(v1alpha1.AfterAppContainer)).
			InitContainers(testutil.Container(name+"-proxy", "registry.example/proxy@sha256:89ab").
				Requests("10m", "16Mi").Limits("10m", "16Mi").RestartAlways().Sidecar("")).
			Volumes(testutil.EmptyDirVolume(name + "-run")).
			ImagePullSecrets("registry-example")
		if i%2 == 1 {
			b.NamespaceSelector(map[string]string{"team": "data"})
		}
		sets[i] = b.Obj()
		// As read from the apiserver, so Cache can keep them.
		sets[i].UID = types.UID(fmt.Sprintf("uid-%02d", i))
		sets[i].ResourceVersion = "1"
	}
	return ns, pod, sets
}

// BenchmarkInjectPod injects a 5-container pod against 20 SidecarSets, as
// the webhook does for every pod created. The goal is 30µs/op with a Cache,
// which the webhook holds; without one every matching set is hashed again.
func BenchmarkInjectPod(b *testing.B) {
	for _, cached := range []bool{true, false} {
		for _, matching := range []int{3, 20} {
			b.Run(fmt.Sprintf("cache=%t/match=%dof20", cached, matching), func(b *testing.B) {
				ns, pod, sets := benchCluster(matching)
				opts := inject.Options{ManagerNamespace: "sidecarset-system"}
				if cached {
					opts.Cache = &inject.Cache{}
				}
				b.ReportAllocs()
				for b.Loop() {
					res := inject.Inject(pod, ns, sets, opts)
					if len(res.Injected) != matching {
						b.Fatalf("injected %d sets, want %d", len(res.Injected), matching)
					}
				}
			})
		}
	}
}
