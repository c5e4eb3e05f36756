package manager

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/sidecarset/sidecarset/internal/controller"
)

// fencedLease is the leader lease, which keeps the pod writes' fence: each
// acquisition or renewal moves the fence's limit forward, and giving the
// lease up closes the fence first. client-go gives it up as soon as a
// renewal fails (the manager releases on cancel, so that a replacement
// takes over at once), before the controllers stop: without the fence, a
// write still in flight could land after a new leader listed the pods.
type fencedLease struct {
	resourcelock.Interface
	fence         *controller.Fence
	leaseDuration time.Duration
	now           func() time.Time
}

func (l fencedLease) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.now()
	err := l.Interface.Create(ctx, ler)
	l.renewed(err, ler, sent)
	return err
}

func (l fencedLease) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity == "" {
		// client-go's release: no holder, so that another takes over now.
		l.fence.Close()
	}
	sent := l.now()
	err := l.Interface.Update(ctx, ler)
	l.renewed(err, ler, sent)
	return err
}

func (l fencedLease) renewed(err error, ler resourcelock.LeaderElectionRecord, sent time.Time) {
	if err == nil && ler.HolderIdentity != "" && ler.HolderIdentity == l.Identity() {
		l.fence.Renewed(sent, l.leaseDuration)
	}
}

// newLease returns the Lease LeaderElectionID in namespace, held under
// the identity controller-runtime would give it (host name and a UUID),
// guarding fence.
func newLease(cfg *rest.Config, namespace string, fence *controller.Fence) (resourcelock.Interface, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader lease identity: %w", err)
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// One hung request must not cost the lease.
	cfg.Timeout = max(RenewDeadline/2, time.Second)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader lease client: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, LeaderElectionID,
		cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return nil, fmt.Errorf("leader lease: %w", err)
	}
	return fencedLease{Interface: lock, fence: fence, leaseDuration: LeaseDuration, now: time.Now}, nil
}
