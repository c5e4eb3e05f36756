package webhook_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/testutil"
	"github.com/sidecarset/sidecarset/internal/validation"
	"github.com/sidecarset/sidecarset/internal/webhook"
)

// failingReader fails its first fails lists with err, then lists no sets.
type failingReader struct {
	client.Reader
	err   error
	fails int
	calls int
}

func (r *failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	r.calls++
	if r.calls <= r.fails {
		return r.err
	}
	return nil
}

// slowReader answers a list when its context ends, with the context's error.
type slowReader struct{ client.Reader }

func (slowReader) List(ctx context.Context, _ client.ObjectList, _ ...client.ListOption) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestValidatorListDeadline: a list that does not answer is cut short in
// time for the probe to fit in the 5 s the apiserver gives the call.
func TestValidatorListDeadline(t *testing.T) {
	v := &webhook.SidecarSetValidator{Reader: slowReader{}}
	set := testutil.SidecarSet("exporter").Selector(map[string]string{"app": "db"}).Container("exporter", "exp:1").Obj()
	began := time.Now()
	_, err := v.ValidateCreate(t.Context(), set)
	if took := time.Since(began); err == nil || took > 2500*time.Millisecond {
		t.Errorf("got %v after %v, want a refusal within 2.5 s", err, took)
	}
}

func TestValidatorRetriesList(t *testing.T) {
	sets := schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "sidecarsets"}
	internal := apierrors.NewInternalError(errors.New("injected fault"))
	cases := []struct {
		name      string
		err       error
		fails     int
		wantCalls int
		wantErr   string
	}{
		{name: "no failure", err: internal, fails: 0, wantCalls: 1},
		{name: "a 500 once", err: internal, fails: 1, wantCalls: 2},
		{name: "a 500 three times", err: internal, fails: 3, wantCalls: 4},
		{name: "a 500 every time", err: internal, fails: 10, wantCalls: 4, wantErr: "list SidecarSets: Internal error occurred: injected fault"},
		{name: "throttled", err: apierrors.NewTooManyRequests("busy", 1), fails: 2, wantCalls: 3},
		{name: "server timeout", err: apierrors.NewServerTimeout(sets, "list", 1), fails: 1, wantCalls: 2},
		{name: "unavailable", err: apierrors.NewServiceUnavailable("restarting"), fails: 1, wantCalls: 2},
		{name: "forbidden is final", err: apierrors.NewForbidden(sets, "", errors.New("no")), fails: 1, wantCalls: 1, wantErr: "forbidden"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reader := &failingReader{err: c.err, fails: c.fails}
			v := &webhook.SidecarSetValidator{Reader: reader, Options: validation.Options{}}
			set := testutil.SidecarSet("exporter").Selector(map[string]string{"app": "db"}).Container("exporter", "exp:1").Obj()
			_, err := v.ValidateCreate(t.Context(), set)
			if reader.calls != c.wantCalls {
				t.Errorf("lists: got %d, want %d", reader.calls, c.wantCalls)
			}
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("got %v, want the set accepted", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("got %v, want an error with %q", err, c.wantErr)
			}
		})
	}
}
