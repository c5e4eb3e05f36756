package manager

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestPoliciesServedAsksAgain: discovery that fails transiently (the
// apiserver answering 500 or 503 while it starts) is asked again, and the
// answer that follows decides; one refused for good (403) ends at once.
func TestPoliciesServedAsksAgain(t *testing.T) {
	served := metav1.APIResourceList{
		GroupVersion: mapGroupVersion,
		APIResources: []metav1.APIResource{{Name: mapResource}, {Name: mapBindings}},
	}
	for _, tc := range []struct {
		name      string
		failures  []int
		wantErr   string
		wantCalls int32
	}{
		{name: "answers at once", wantCalls: 1},
		{name: "500 then 503, then answers", failures: []int{http.StatusInternalServerError, http.StatusServiceUnavailable}, wantCalls: 3},
		{name: "403 is not asked again", failures: []int{http.StatusForbidden}, wantErr: "discover admissionregistration.k8s.io/v1", wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1))
				if r.URL.Path != "/apis/"+mapGroupVersion {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if n <= len(tc.failures) {
					code := tc.failures[n-1]
					w.WriteHeader(code)
					_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Message: "injected"})
					return
				}
				_ = json.NewEncoder(w).Encode(served)
			}))
			defer srv.Close()

			got, err := policiesServed(&rest.Config{Host: srv.URL})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("policiesServed: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("policiesServed: error %v, want one containing %q", err, tc.wantErr)
			case tc.wantErr == "" && !got:
				t.Error("policiesServed = false, want true: the apiserver serves both resources")
			}
			if n := calls.Load(); n != tc.wantCalls {
				t.Errorf("%d requests, want %d", n, tc.wantCalls)
			}
		})
	}
}
