package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/revision"
)

func TestPods(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.CreatePods(3, nil, nil)
	f.complete(3)

	// The partition keeps two pods on v1: p01 moves to v2.
	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Partition = partition("2")
		s.Spec.Containers[0].Image = "exporter:v2"
	})
	f.complete(1)
	// A hand edit of p03's sidecar to an older image: drift.
	p03 := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: f.NS, Name: "p03"}, p03); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(p03.DeepCopy())
	for i := range p03.Spec.Containers {
		if p03.Spec.Containers[i].Name == "exporter" {
			p03.Spec.Containers[i].Image = "exporter:v0"
		}
	}
	if err := env.Client.Patch(t.Context(), p03, patch); err != nil {
		t.Fatalf("hand-edit p03: %v", err)
	}
	// The rows below are compared with the pods' statuses read after the
	// command: the kubelet must have acted on the edit before it runs (a
	// real one takes a second or so to swap the container).
	f.WaitPods("p03 running exporter:v0", func(pods []corev1.Pod) bool {
		if len(pods) != 3 {
			return false
		}
		st := fixture.ContainerStatus(&pods[2], "exporter")
		return st.Image == "docker.io/library/exporter:v0" && st.Ready
	})

	r := ok(t, "pods", f.Set)
	mustContain(t, r.out, "POD", "REVISION", "SIDECARS", "DECLARED", "RUNNING", "IMAGE-ID", "READY", "STATE", "REASON")
	pods := f.Pods()
	wantState := map[string]string{"p01": "updated", "p02": "old", "p03": "drifted"}
	for _, p := range pods {
		cells := row(t, r.out, f.NS+"/"+p.Name)
		state, err := revision.Decode(p.Annotations)
		if err != nil {
			t.Fatal(err)
		}
		var st corev1.ContainerStatus
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "exporter" {
				st = s
			}
		}
		want := []string{f.NS + "/" + p.Name, state[f.Set].Revision, "exporter", state[f.Set].Containers[0].Image,
			st.Image, short(st.ImageID), cells[6], wantState[p.Name], "<none>"}
		if diff := cmp.Diff(want, cells); diff != "" {
			t.Errorf("row of %s (-want +got):\n%s", p.Name, diff)
		}
	}
	if cells := row(t, r.out, f.NS+"/p01"); cells[3] != "exporter:v2" || cells[4] != "docker.io/library/exporter:v2" || cells[6] != "true" {
		t.Errorf("p01 should declare and run exporter:v2 and be ready: %v", cells)
	}
	// The hand edit shows as RUNNING against what was declared.
	if cells := row(t, r.out, f.NS+"/p03"); cells[3] != "exporter:v1" || cells[4] != "docker.io/library/exporter:v0" {
		t.Errorf("p03 should declare exporter:v1 and run exporter:v0: %v", cells)
	}
	if a, b := row(t, r.out, f.NS+"/p01")[1], row(t, r.out, f.NS+"/p02")[1]; a == b || a != f.GetSet().Status.LatestRevision {
		t.Errorf("p01 should be on the latest revision %s and p02 on an older one; got %s and %s", f.GetSet().Status.LatestRevision, a, b)
	}

	wide := ok(t, "pods", f.Set, "-o", "wide")
	mustContain(t, wide.out, "NODE", pods[0].Spec.NodeName)
	for _, p := range pods {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "exporter" && !strings.Contains(wide.out, s.ImageID) {
				t.Errorf("-o wide lacks the full image ID %s of %s", s.ImageID, p.Name)
			}
		}
	}

	var table metav1.Table
	if err := json.Unmarshal([]byte(ok(t, "pods", f.Set, "-o", "json").out), &table); err != nil {
		t.Fatalf("-o json is not a Table: %v", err)
	}
	var states []string
	for _, rw := range table.Rows {
		states = append(states, rw.Cells[7].(string))
	}
	if table.Kind != "Table" || cmp.Diff([]string{"updated", "old", "drifted"}, states) != "" {
		t.Errorf("-o json: kind %q, states %v", table.Kind, states)
	}

	// A change beyond the image makes every pod need a recreate; the hand
	// edit still shows.
	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
	})
	f.WaitStatus("3 not upgradable, 1 drifted", func(st v1alpha1.SidecarSetStatus) bool {
		return st.ObservedGeneration == f.GetSet().Generation && st.NotUpgradablePods == 3 && st.DriftedPods == 1
	})
	r = ok(t, "pods", f.Set)
	wantState = map[string]string{"p01": "not-upgradable", "p02": "not-upgradable", "p03": "drifted"}
	for name, want := range wantState {
		if got := row(t, r.out, f.NS+"/"+name)[7]; got != want {
			t.Errorf("after the env change, %s is %s, want %s", name, got, want)
		}
	}

	other := newFixture(t)
	empty := ok(t, "pods", f.Set, "-n", other.NS)
	mustContain(t, empty.out, "No pods carry SidecarSet "+f.Set+"'s record in namespace "+other.NS)
	ns := ok(t, "pods", f.Set, "-n", f.NS)
	if n := len(lines(ns.out)); n != 4 {
		t.Errorf("-n %s: %d lines, want a header and 3 pods", f.NS, n)
	}
}

// TestPodsSkipped: the pods the set was left out of are listed below the
// table, with the reason the webhook recorded on each; -o json keeps the
// table alone.
func TestPodsSkipped(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	f.CreateSet(set)
	withData := f.NewPod("p01")
	withData.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	f.CreatePod(withData)
	f.CreatePod(f.NewPod("p02"))
	f.WaitReady(2)

	r := ok(t, "pods", f.Set)
	row(t, r.out, f.NS+"/p01")
	mustContain(t, r.out, "SKIPPED")
	if got, want := strings.Join(row(t, r.out, f.NS+"/p02"), " "),
		f.NS+`/p02 container "exporter" mounts volume "data", which neither the pod nor the SidecarSet declares`; got != want {
		t.Errorf("skipped p02: %q, want %q", got, want)
	}

	f.WaitStatus("1 skipped", func(st v1alpha1.SidecarSetStatus) bool { return st.SkippedPods == 1 })
	if got := row(t, ok(t, "status", f.Set).out, f.Set)[9]; got != "1" {
		t.Errorf("status: SKIPPED %s, want 1", got)
	}

	var table metav1.Table
	if err := json.Unmarshal([]byte(ok(t, "pods", f.Set, "-o", "json").out), &table); err != nil {
		t.Fatalf("-o json is not a Table: %v", err)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[0] != f.NS+"/p01" {
		t.Errorf("-o json: rows %v, want p01's alone", table.Rows)
	}
	if got := ok(t, "pods", f.Set, "-o", "jsonpath={.rows[*].cells[0]}").out; got != f.NS+"/p01" {
		t.Errorf("-o jsonpath: %q, want %s/p01", got, f.NS)
	}
	if r := kubectl(t, false, "pods", f.Set, "-o", "name"); cli.ExitCode(r.err) != 2 || !strings.Contains(r.err.Error(), "-o jsonpath='{.rows[*].cells[0]}' lists them") {
		t.Errorf("pods -o name: exit %d, %v; want exit 2 saying what lists the pods", cli.ExitCode(r.err), r.err)
	}

	other := newFixture(t)
	if empty := ok(t, "pods", f.Set, "-n", other.NS); strings.Contains(empty.out, "SKIPPED") {
		t.Errorf("-n %s lists skipped pods of another namespace:\n%s", other.NS, empty.out)
	}
}

// short is the 12-digit form the table shows.
func short(imageID string) string {
	d := imageID[strings.LastIndex(imageID, "@")+1:]
	return d[:len("sha256:")+12]
}
