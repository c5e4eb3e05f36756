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
	"github.com/sidecarset/sidecarset/internal/revision"
)

func TestPods(t *testing.T) {
	f := newFixture(t)
	f.createSet(f.sidecarSet("exporter:v1"))
	f.createPods(3)
	f.complete(3)

	// The partition keeps two pods on v1: p01 moves to v2.
	f.updateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Partition = partition("2")
		s.Spec.Containers[0].Image = "exporter:v2"
	})
	f.complete(1)
	// A hand edit of p03's sidecar: drift.
	p03 := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: "p03"}, p03); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(p03.DeepCopy())
	for i := range p03.Spec.Containers {
		if p03.Spec.Containers[i].Name == "exporter" {
			p03.Spec.Containers[i].Image = "exporter:by-hand"
		}
	}
	if err := env.Client.Patch(t.Context(), p03, patch); err != nil {
		t.Fatalf("hand-edit p03: %v", err)
	}

	r := ok(t, "pods", f.set)
	mustContain(t, r.out, "POD", "REVISION", "SIDECARS", "DECLARED", "RUNNING", "IMAGE-ID", "READY", "STATE")
	pods := f.pods()
	wantState := map[string]string{"p01": "updated", "p02": "old", "p03": "drifted"}
	for _, p := range pods {
		cells := row(t, r.out, f.ns+"/"+p.Name)
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
		want := []string{f.ns + "/" + p.Name, state[f.set].Revision, "exporter", image(&p, "exporter"),
			st.Image, short(st.ImageID), cells[6], wantState[p.Name]}
		if diff := cmp.Diff(want, cells); diff != "" {
			t.Errorf("row of %s (-want +got):\n%s", p.Name, diff)
		}
	}
	if cells := row(t, r.out, f.ns+"/p01"); cells[3] != "exporter:v2" || cells[4] != "docker.io/library/exporter:v2" || cells[6] != "true" {
		t.Errorf("p01 should declare and run exporter:v2 and be ready: %v", cells)
	}
	if a, b := row(t, r.out, f.ns+"/p01")[1], row(t, r.out, f.ns+"/p02")[1]; a == b || a != f.getSet().Status.LatestRevision {
		t.Errorf("p01 should be on the latest revision %s and p02 on an older one; got %s and %s", f.getSet().Status.LatestRevision, a, b)
	}

	wide := ok(t, "pods", f.set, "-o", "wide")
	mustContain(t, wide.out, "NODE", pods[0].Spec.NodeName)
	for _, p := range pods {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "exporter" && !strings.Contains(wide.out, s.ImageID) {
				t.Errorf("-o wide lacks the full image ID %s of %s", s.ImageID, p.Name)
			}
		}
	}

	var table metav1.Table
	if err := json.Unmarshal([]byte(ok(t, "pods", f.set, "-o", "json").out), &table); err != nil {
		t.Fatalf("-o json is not a Table: %v", err)
	}
	var states []string
	for _, rw := range table.Rows {
		states = append(states, rw.Cells[7].(string))
	}
	if table.Kind != "Table" || cmp.Diff([]string{"updated", "old", "drifted"}, states) != "" {
		t.Errorf("-o json: kind %q, states %v", table.Kind, states)
	}

	other := newFixture(t)
	empty := ok(t, "pods", f.set, "-n", other.ns)
	mustContain(t, empty.out, "No pods carry SidecarSet "+f.set+"'s record in namespace "+other.ns)
	ns := ok(t, "pods", f.set, "-n", f.ns)
	if n := len(lines(ns.out)); n != 4 {
		t.Errorf("-n %s: %d lines, want a header and 3 pods", f.ns, n)
	}
}

// short is the 12-digit form the table shows.
func short(imageID string) string {
	d := imageID[strings.LastIndex(imageID, "@")+1:]
	return d[:len("sha256:")+12]
}
