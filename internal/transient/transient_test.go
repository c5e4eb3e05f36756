package transient

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "sidecarset.dev", Resource: "sidecarsets"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{apierrors.NewConflict(gr, "s", errors.New("modified")), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewInternalError(errors.New(`failed calling webhook "sidecarsets.sidecarset.dev"`)), true},
		{apierrors.NewTimeoutError("slow", 1), true},
		{apierrors.NewGenericServerResponse(502, "get", gr, "s", "bad gateway", 0, true), true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{apierrors.NewNotFound(gr, "s"), false},
		{apierrors.NewForbidden(gr, "s", errors.New("no")), false},
		{apierrors.NewBadRequest("bad"), false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
	} {
		if got := Is(tc.err); got != tc.want {
			t.Errorf("Is(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
