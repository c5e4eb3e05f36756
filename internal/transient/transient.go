// Package transient tells the failures of a call to the apiserver that may
// pass when the same call is made again from those that will not.
package transient

import (
	"context"
	"errors"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Backoff is how a call that failed transiently is tried again: 9 tries
// over about 30 seconds (0.25s, 0.5s, 1s, ... capped at 8s), enough for an
// apiserver restart or a webhook coming back, short enough for a caller to
// learn of an outage.
var Backoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 9, Cap: 8 * time.Second}

// Is reports whether a call that failed with err may succeed when tried
// again unchanged: the apiserver was busy, restarting, or briefly
// unreachable, or a webhook it calls was.
func Is(err error) bool {
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case apierrors.IsConflict(err), apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err),
		apierrors.IsTimeout(err), apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err),
		apierrors.IsUnexpectedServerError(err):
		return true
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err):
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code >= 500 {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}
