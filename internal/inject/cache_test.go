package inject_test

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

func TestCacheGivesTheSameResult(t *testing.T) {
	ns, pod, sets := benchCluster(3)
	bad := testutil.SidecarSet("zz-bad").Obj() // its error is cached too
	bad.UID, bad.ResourceVersion = "uid-bad", "1"
	sets = append(sets, bad)
	want := inject.Inject(pod, ns, sets, opts)

	cached := opts
	cached.Cache = &inject.Cache{}
	for range 2 { // the first call fills the cache, the second reads it
		if diff := cmp.Diff(want, inject.Inject(pod, ns, sets, cached), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Inject() with a Cache (-without +with):\n%s", diff)
		}
	}
	for _, set := range sets {
		wantOK, wantErr := inject.Matches(set, pod, ns, opts)
		gotOK, gotErr := inject.Matches(set, pod, ns, cached)
		if gotOK != wantOK || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("Matches(%s) with a Cache = %t, %v; without = %t, %v", set.Name, gotOK, gotErr, wantOK, wantErr)
		}
	}
}

func TestCacheFollowsVersions(t *testing.T) {
	versioned := func(image, uid, resourceVersion string) *v1alpha1.SidecarSet {
		set := testutil.SidecarSet("mesh").Selector(dbLabels).Containers(guaranteed("proxy", image).Sidecar("")).Obj()
		set.UID, set.ResourceVersion = types.UID(uid), resourceVersion
		return set
	}
	tests := []struct {
		name          string
		first, second *v1alpha1.SidecarSet
	}{
		{name: "a new resourceVersion", first: versioned("proxy:1", "u1", "1"), second: versioned("proxy:2", "u1", "2")},
		{name: "a new object of the same name", first: versioned("proxy:1", "u1", "1"), second: versioned("proxy:2", "u2", "1")},
		{name: "no version: never cached", first: versioned("proxy:1", "", ""), second: versioned("proxy:2", "", "")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := inject.Options{Cache: &inject.Cache{}}
			inject.Inject(dbPod().Obj(), shop, []*v1alpha1.SidecarSet{tc.first}, o)
			got := inject.Inject(dbPod().Obj(), shop, []*v1alpha1.SidecarSet{tc.second}, o)
			state, err := revision.Decode(got.Pod.Annotations)
			if err != nil {
				t.Fatal(err)
			}
			if want := revision.Hash(&tc.second.Spec); state["mesh"].Hash != want {
				t.Errorf("recorded hash %s, want %s (the second version's)", state["mesh"].Hash, want)
			}
		})
	}
}

// TestCacheConcurrent is for the race detector: the webhook injects
// concurrently with one Cache.
func TestCacheConcurrent(t *testing.T) {
	ns, pod, sets := benchCluster(3)
	o := inject.Options{Cache: &inject.Cache{}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if got := inject.Inject(pod, ns, sets, o); len(got.Injected) != 3 {
					t.Errorf("Inject() injected %v, want 3 sets", got.Injected)
				}
			}
		})
	}
	wg.Wait()
}
