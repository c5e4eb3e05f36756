package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// TestRecordPatch checks, for pods and updates drawn at random, that the
// patch of a write turns the pod into what rollout.Apply made of it, and
// is the patch a diff of the whole pods gives.
func TestRecordPatch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cached, u := drawWrite(t)
		written, _, err := rollout.Apply(cached, "exporter", u, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		patch, err := recordPatch(cached, written)
		if err != nil {
			t.Fatal(err)
		}
		got, err := patch.Data(written)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := client.StrategicMergeFrom(cached, client.MergeFromWithOptimisticLock{}).Data(written)
		if err != nil {
			t.Fatal(err)
		}
		var gotV, wholeV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(whole, &wholeV); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wholeV, gotV); diff != "" {
			t.Fatalf("patch differs from the diff of the whole pods (-whole +patch):\n%s", diff)
		}

		before, err := json.Marshal(cached)
		if err != nil {
			t.Fatal(err)
		}
		after, err := strategicpatch.StrategicMergePatch(before, got, corev1.Pod{})
		if err != nil {
			t.Fatalf("apply the patch: %v\n%s", err, got)
		}
		var patched corev1.Pod
		if err := json.Unmarshal(after, &patched); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(written, &patched); diff != "" {
			t.Fatalf("the patch does not write what Apply made (-want +got):\n%s", diff)
		}
	})
}

// drawWrite draws a pod that the SidecarSet "exporter" injected, with other
// containers and annotations and maybe another set's record, in either
// form, and an update of the exporter's sidecars.
func drawWrite(t *rapid.T) (*corev1.Pod, rollout.PodUpdate) {
	tag := rapid.SampledFrom([]string{"1", "2", "3"})
	pod := testutil.Pod("shop", "db-0").Containers(testutil.Container("db", "mysql:8").Requests("1", "1Gi").Obj()).Obj()
	pod.ResourceVersion = rapid.StringMatching(`[1-9][0-9]{0,6}`).Draw(t, "resourceVersion")
	pod.Annotations = map[string]string{}
	if rapid.Bool().Draw(t, "another annotation") {
		pod.Annotations["team"] = "shop"
	}
	state := revision.State{}
	sidecars := map[string]bool{}
	for _, name := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"exporter", "shipper", "proxy"}), 1, 3, rapid.ID).Draw(t, "sidecars") {
		sidecars[name] = rapid.Bool().Draw(t, "init "+name)
		c := testutil.Container(name, name+":"+tag.Draw(t, "image "+name)).Obj()
		if sidecars[name] {
			c.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		} else {
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
	}
	record := func(set string, names ...string) revision.SetState {
		st := revision.SetState{Revision: set + "-1", Hash: "1", ImagelessHash: "i"}
		for _, name := range names {
			st.Containers = append(st.Containers, revision.ContainerState{Name: name, Init: sidecars[name], Image: name + ":1"})
		}
		return st
	}
	var ours []string
	for _, name := range slices.Sorted(maps.Keys(sidecars)) {
		if name == "exporter" || rapid.Bool().Draw(t, "ours "+name) {
			ours = append(ours, name)
		}
	}
	state["exporter"] = record("exporter", ours...)
	injected := "exporter"
	switch rapid.SampledFrom([]string{"none", "in the state", "in the state, written", "per set"}).Draw(t, "another set's record") {
	case "in the state":
		state["mesh"] = record("mesh")
		injected += ",mesh"
	case "in the state, written":
		// With a write of its own in its record.
		mesh := record("mesh")
		mesh.Write = &revision.Write{Generation: 1}
		state["mesh"] = mesh
		injected += ",mesh"
	case "per set":
		// Folded into the state annotation by the write, which removes
		// the key.
		pod.Annotations[revision.PerSetKey("mesh")] = revision.EncodeSetState(record("mesh"))
		injected += ",mesh"
	}
	pod.Annotations[v1alpha1.AnnotationState] = revision.Encode(state)
	pod.Annotations[v1alpha1.AnnotationInjected] = injected

	u := rollout.PodUpdate{Action: rollout.ActionUpdate, State: record("exporter", ours...)}
	u.State.Revision, u.State.Hash = "exporter-2", "2"
	for _, name := range ours {
		image := name + ":" + tag.Draw(t, "new image "+name)
		u.Containers = append(u.Containers, rollout.ContainerImage{Name: name, Init: sidecars[name], Image: image})
		u.State.Containers[len(u.Containers)-1].Image = image
	}
	return pod, u
}

func TestRecordPatchNeedsResourceVersion(t *testing.T) {
	pod := testutil.Pod("shop", "db-0").Container("exporter", "exporter:1").Obj()
	written := pod.DeepCopy()
	written.Spec.Containers[0].Image = "exporter:2"
	if _, err := recordPatch(pod, written); err == nil || !strings.Contains(err.Error(), "resourceVersion") {
		t.Errorf("recordPatch of a pod without a resourceVersion: error %v, want one naming it", err)
	}
}

// BenchmarkRecordPatch makes the patch of a write into a pod two SidecarSets
// injected: recordPatch's, and the diff of the whole pods it replaces.
func BenchmarkRecordPatch(b *testing.B) {
	pod := testutil.Pod("shop", "db-0").Containers(
		testutil.Container("db", "mysql:8").Requests("1", "1Gi").Limits("2", "2Gi").VolumeMount("data", "/var/lib/mysql").Obj(),
		testutil.Container("exporter", "exporter:1").Requests("100m", "64Mi").Obj(),
	).InitContainers(testutil.Container("shipper", "shipper:1").RestartAlways().Obj()).Obj()
	pod.ResourceVersion = "41"
	pod.Annotations = map[string]string{
		v1alpha1.AnnotationInjected: "exporter,logs",
		v1alpha1.AnnotationState: revision.Encode(revision.State{
			"exporter": {Revision: "exporter-1", Hash: "1", ImagelessHash: "i", Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:1"}}},
			"logs":     {Revision: "logs-1", Hash: "3", ImagelessHash: "j", Containers: []revision.ContainerState{{Name: "shipper", Init: true, Image: "shipper:1"}}},
		}),
	}
	written, _, err := rollout.Apply(pod, "exporter", rollout.PodUpdate{
		Action:     rollout.ActionUpdate,
		Containers: []rollout.ContainerImage{{Name: "exporter", Image: "exporter:2"}},
		State: revision.SetState{Revision: "exporter-2", Hash: "2", ImagelessHash: "i",
			Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:2", PreviousImage: "exporter:1"}}},
	}, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	for name, patch := range map[string]func() (client.Patch, error){
		"record": func() (client.Patch, error) { return recordPatch(pod, written) },
		"whole": func() (client.Patch, error) {
			return client.StrategicMergeFrom(pod, client.MergeFromWithOptimisticLock{}), nil
		},
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				p, err := patch()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Data(written); err != nil {
					b.Fatal(fmt.Errorf("%s: %w", name, err))
				}
			}
		})
	}
}
