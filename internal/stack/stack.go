// Package stack starts the whole local system in one call: a real control
// plane (internal/testenv) with the webhook configurations installed,
// simulated nodes (internal/kubeletsim) or a real node (internal/realnode),
// and the sidecarset manager serving the webhooks. Integration tests and the
// playground run the same stack.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sidecarset/sidecarset/internal/kubeletsim"
	"github.com/sidecarset/sidecarset/internal/manager"
	"github.com/sidecarset/sidecarset/internal/realnode"
	"github.com/sidecarset/sidecarset/internal/testenv"
	"github.com/sidecarset/sidecarset/internal/validation"
)

// Options say what to start.
type Options struct {
	// ControllerManager starts kube-controller-manager, for workloads,
	// garbage collection and PodDisruptionBudget status.
	ControllerManager bool
	// Sim configures the simulated nodes; Sim.Nodes 0 starts none.
	Sim kubeletsim.Options
	// FailurePolicy, if set, replaces the pod webhook's failurePolicy.
	FailurePolicy admissionregistrationv1.FailurePolicyType
	// Output receives the control plane's logs; nil discards them.
	Output io.Writer
	// APIServerFlags are extra kube-apiserver flags (a real node needs
	// realnode.APIServerFlags; RealNode sets them).
	APIServerFlags map[string]string
	// RealNode starts one real node (internal/realnode: the kubelet,
	// kube-scheduler, kube-proxy, containerd and runc): its network and
	// containerd before the control plane, which then listens on the
	// node's address with the kube-apiserver flags the node needs, and the
	// rest once the control plane answers. It needs root and the node's
	// binaries in KUBEBUILDER_ASSETS; its logs go to Output.
	RealNode bool
	// RealImages are the images the real node imports; its pods can run no
	// others.
	RealImages []realnode.Image
	// WithoutManager starts no manager and installs neither its webhook
	// configurations nor the CRDs: what installs the manager (the chart)
	// brings them.
	WithoutManager bool
}

// Stack is a running local system.
type Stack struct {
	Env *testenv.Env
	// Node is the real node; nil unless Options.RealNode.
	Node *realnode.Node

	stopSim context.CancelFunc
	simDone chan struct{}

	mu        sync.Mutex
	stopMgr   context.CancelFunc
	mgrDone   <-chan error
	mgrOption manager.Options
}

// Start starts the control plane, the nodes and the manager, and returns
// once all answer. Stop it with Stop.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	mgrOpts := manager.DefaultOptions()
	// One manager at one address, with no replica to take its calls over:
	// a drain there only holds each stop back, so it is kept short while
	// every stop still goes through it as the binary's does.
	mgrOpts.ShutdownDrain = time.Second
	// The examples' patchPodMetadata writes keys under example.com/; a
	// cluster's operator allows such keys with the same flag.
	mgrOpts.PatchPodMetadataAllowedKeys = validation.AllowedKeys{"example.com/"}
	s := &Stack{mgrOption: mgrOpts}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()
	apiserverFlags := maps.Clone(opts.APIServerFlags)
	servingAddress := ""
	if opts.RealNode {
		if os.Geteuid() != 0 {
			return nil, errors.New("a real node runs a kubelet, containerd and runc and needs root")
		}
		if apiserverFlags == nil {
			apiserverFlags = map[string]string{}
		}
		maps.Copy(apiserverFlags, realnode.APIServerFlags())
		servingAddress = realnode.APIServerAddress
		assets, err := testenv.Assets()
		if err != nil {
			return nil, err
		}
		if s.Node, err = realnode.New(ctx, realnode.Options{Assets: assets, Images: opts.RealImages, Output: opts.Output}); err != nil {
			return nil, fmt.Errorf("start the real node: %w", err)
		}
	}
	var hooks *envtest.WebhookInstallOptions
	if !opts.WithoutManager {
		if hooks, err = testenv.WebhookOptions(opts.FailurePolicy); err != nil {
			return nil, err
		}
	}
	s.Env, err = testenv.Start(testenv.Options{
		ControllerManager: opts.ControllerManager,
		NodeLifecycle:     opts.RealNode,
		WithoutCRDs:       opts.WithoutManager,
		Webhooks:          hooks,
		Output:            opts.Output,
		APIServerFlags:    apiserverFlags,
		ServingAddress:    servingAddress,
	})
	if err != nil {
		return nil, fmt.Errorf("start the control plane: %w", err)
	}
	env := s.Env
	if opts.Sim.Nodes > 0 {
		sim, err := kubeletsim.New(env.Config, opts.Sim)
		if err != nil {
			return nil, err
		}
		simCtx, stop := context.WithCancel(context.Background())
		s.stopSim, s.simDone = stop, make(chan struct{})
		go func() {
			defer close(s.simDone)
			_ = sim.Run(simCtx)
		}()
		if err := sim.Ready(ctx); err != nil {
			return nil, fmt.Errorf("start the simulated nodes: %w", err)
		}
	}
	if s.Node != nil {
		if err := s.Node.Join(ctx, env.KubeConfig); err != nil {
			return nil, fmt.Errorf("start the real node: %w", err)
		}
	}
	if opts.WithoutManager {
		return s, nil
	}
	if err := s.StartManager(); err != nil {
		return nil, err
	}
	return s, nil
}

// StartManager starts the manager again after StopManager (Start starts
// it the first time).
func (s *Stack) StartManager() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopMgr != nil {
		return errors.New("the manager is already running")
	}
	mgrCtx, stop := context.WithCancel(context.Background())
	_, done, err := s.Env.StartManager(mgrCtx, nil, s.mgrOption)
	if err != nil {
		stop()
		return fmt.Errorf("start the manager: %w", err)
	}
	s.stopMgr, s.mgrDone = stop, done
	return nil
}

// ManagerOptions returns the options StartManager starts the manager with.
func (s *Stack) ManagerOptions() manager.Options {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mgrOption
}

// SetManagerOptions makes StartManager start the manager with opts from now
// on; a running manager keeps the options it was started with.
func (s *Stack) SetManagerOptions(opts manager.Options) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mgrOption = opts
}

// StopManager stops the manager, waits until it is gone and returns what it
// stopped with; it does nothing when the manager is not running.
func (s *Stack) StopManager() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopMgr == nil {
		return nil
	}
	s.stopMgr()
	err := <-s.mgrDone
	s.stopMgr, s.mgrDone = nil, nil
	if err != nil {
		return fmt.Errorf("stop the manager: %w", err)
	}
	return nil
}

// Stop stops everything Start started, the manager first. A real node
// leaves (realnode.Node.Leave) after kube-controller-manager and before the
// apiserver: it deletes its pods through the apiserver, and no workload
// controller may create them again; the rest of it (containerd, the bridge
// the apiserver listened on) goes after the control plane.
func (s *Stack) Stop() error {
	errs := []error{s.StopManager()}
	if s.stopSim != nil {
		s.stopSim()
		<-s.simDone
		s.stopSim = nil
	}
	if s.Node != nil {
		if s.Env != nil {
			s.Env.StopControllerManager()
		}
		errs = append(errs, s.Node.Leave())
	}
	if s.Env != nil {
		errs = append(errs, s.Env.Stop())
	}
	if s.Node != nil {
		// The apiserver listened on the node's bridge, which goes last.
		errs = append(errs, s.Node.Stop())
		s.Node = nil
	}
	return errors.Join(errs...)
}

// TestOptions are what the whole-loop test suites run: kube-controller-manager
// and three simulated nodes whose back-offs and crashes are short enough for
// failing images to cycle within a test.
func TestOptions() Options {
	return Options{
		ControllerManager: true,
		Sim: kubeletsim.Options{
			Nodes:        3,
			BackOff:      200 * time.Millisecond,
			MaxBackOff:   time.Second,
			CrashesAfter: 200 * time.Millisecond,
		},
	}
}
