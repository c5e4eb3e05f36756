package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultBackoff is how the waiting verbs retry a call that failed
// transiently: 9 tries over about 30 seconds (0.25s, 0.5s, 1s, ... capped
// at 8s), enough for an apiserver restart or a manager's webhook coming
// back, short enough for a script to learn of an outage.
var DefaultBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 9, Cap: 8 * time.Second}

// transient reports whether a call that failed with err may succeed when
// tried again unchanged: the apiserver was busy, restarting, or briefly
// unreachable, or a webhook it calls was.
func transient(err error) bool {
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

// retryingClient retries the calls of the waiting verbs that fail
// transiently, with back-off, saying so on warn. Every call it retries is
// safe to repeat: reads, dry runs, and merge patches that set a value.
type retryingClient struct {
	client.Client
	backoff wait.Backoff
	warn    io.Writer
}

// do runs call until it succeeds, fails for good, or the retries run out:
// at the verb's own deadline when ctx has one (--timeout), after the
// back-off's steps otherwise. Out of steps, a transient error is reported
// as the cluster being unreachable (ErrUnreachable), except a conflict,
// which only means others keep writing, and a webhook the apiserver failed
// to call, which means the apiserver answers.
func (r *retryingClient) do(ctx context.Context, what string, call func() error) error {
	backoff := r.backoff
	if _, ok := ctx.Deadline(); ok {
		backoff.Steps = math.MaxInt32
	}
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		last = call()
		if transient(last) && ctx.Err() == nil {
			fmt.Fprintf(r.warn, "warning: %s: %v; retrying\n", what, last)
			return false, nil
		}
		return true, nil
	})
	switch {
	case last == nil || !transient(last):
		return last
	case ctx.Err() != nil:
		return fmt.Errorf("%w (last error: %w)", ctx.Err(), last)
	case !wait.Interrupted(err) || apierrors.IsConflict(last):
	case webhookFailed(last):
		return fmt.Errorf("the apiserver answers, but failed to call a webhook %d times: %w", backoff.Steps, last)
	default:
		return fmt.Errorf("%w: %d tries: %w", ErrUnreachable, backoff.Steps, last)
	}
	return last
}

// webhookFailed reports whether err is the apiserver's answer that it could
// not call an admission webhook.
func webhookFailed(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook")
}

func (r *retryingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return r.do(ctx, fmt.Sprintf("get %T %s", obj, key), func() error { return r.Client.Get(ctx, key, obj, opts...) })
}

func (r *retryingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.do(ctx, fmt.Sprintf("list %T", list), func() error { return r.Client.List(ctx, list, opts...) })
}

func (r *retryingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return r.do(ctx, fmt.Sprintf("patch %T %s", obj, client.ObjectKeyFromObject(obj)), func() error { return r.Client.Patch(ctx, obj, patch, opts...) })
}

// Create is retried for dry runs only: a real create that timed out may
// have happened.
func (r *retryingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	o := (&client.CreateOptions{}).ApplyOptions(opts)
	if len(o.DryRun) == 0 {
		return r.Client.Create(ctx, obj, opts...)
	}
	return r.do(ctx, fmt.Sprintf("dry-run create %T", obj), func() error { return r.Client.Create(ctx, obj, opts...) })
}
