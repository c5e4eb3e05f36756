package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Service stands for the chart's webhook Service as the apiserver reaches
// it through kube-proxy, in front of manager replicas that each serve the
// webhooks on a port of their own. It listens where the apiserver's webhook
// configurations send the apiserver, and hands each new connection to one of
// its ready endpoints, chosen at random as kube-proxy's iptables mode does;
// a connection stays with its endpoint until one side closes it. With no
// endpoint ready, or the one chosen refusing it, the connection is closed at
// once: the apiserver's webhook call fails as it does on a refused
// connection, and neither is retried (its admission dispatchers call each
// webhook once; client-go retries a POST only on a Retry-After answer).
//
// How an endpoint stops being ready is modelled after a real Service's:
//   - a replica that reports not ready (/readyz, probed every ProbePeriod)
//     leaves Propagation later, the EndpointSlice change reaching
//     kube-proxy;
//   - a replica whose process exits (SIGKILL, a crash) is noticed by the
//     kubelet ExitNoticed later (its pod lifecycle events are relisted every
//     second), which marks the pod not ready at once, and leaves Propagation
//     after that; a probe that finds nothing listening changes nothing,
//     since the kubelet acts on the exit long before its failureThreshold;
//   - a replica whose pod is deleted (Remove) leaves Propagation later,
//     while the kubelet sends SIGTERM.
//
// envtest's apiserver calls one fixed address, and nothing there removes a
// pod's endpoint on its own: this is where that happens.
type Service struct {
	// ProbePeriod, Propagation and ExitNoticed are the delays above.
	ProbePeriod, Propagation, ExitNoticed time.Duration

	ln net.Listener

	mu        sync.Mutex
	endpoints []*Endpoint
	conns     map[net.Conn]*Endpoint
	wg        sync.WaitGroup
}

// Endpoint is one replica behind the Service.
type Endpoint struct {
	// Name tells the replica apart in messages.
	Name string
	// Addr is where its webhooks are served.
	Addr string
	// Readyz is the URL of its readiness check.
	Readyz string
	// Exited, when not nil, is closed once its process has ended.
	Exited <-chan struct{}

	// ready is the endpoint as the Service sees it, guarded by the
	// Service's mu.
	ready bool
	// conns counts the connections the Service joined to it, now open.
	conns int
	// removed stops its probe.
	removed chan struct{}
}

// StartService starts a Service listening on addr with the delays of a
// small, healthy cluster: a probe every 250ms, an exit noticed within 1s,
// 2s from a change of readiness to kube-proxy. Stop stops it.
func StartService(addr string) (*Service, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen where the apiserver calls the webhooks: %w", err)
	}
	s := &Service{
		ProbePeriod: 250 * time.Millisecond,
		Propagation: 2 * time.Second,
		ExitNoticed: time.Second,
		ln:          ln,
		conns:       map[net.Conn]*Endpoint{},
	}
	s.wg.Go(s.serve)
	return s, nil
}

// Stop closes the listener and every connection the Service joined, and
// waits until its goroutines are done.
func (s *Service) Stop() {
	_ = s.ln.Close()
	s.mu.Lock()
	for _, ep := range s.endpoints {
		close(ep.removed)
	}
	s.endpoints = nil
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Add makes ep an endpoint, probed from now on; it serves once ready. The
// endpoint it returns is the one to give Remove and WaitReady.
func (s *Service) Add(ep Endpoint) *Endpoint {
	e := &ep
	e.ready, e.conns, e.removed = false, 0, make(chan struct{})
	s.mu.Lock()
	s.endpoints = append(s.endpoints, e)
	s.mu.Unlock()
	s.wg.Go(func() { s.probe(e) })
	return e
}

// probe follows an endpoint's readiness until it is removed, or until the
// kubelet has noticed that its process exited.
func (s *Service) probe(e *Endpoint) {
	observed := false
	set := func(ready bool) {
		observed = ready
		time.AfterFunc(s.Propagation, func() {
			s.mu.Lock()
			e.ready = ready
			s.mu.Unlock()
		})
	}
	exited := e.Exited
	var noticed <-chan time.Time
	tick := time.NewTicker(s.ProbePeriod)
	defer tick.Stop()
	for {
		if status, err := readyzStatus(e.Readyz); err == nil && (status == http.StatusOK) != observed {
			set(!observed)
		}
		select {
		case <-e.removed:
			return
		case <-exited:
			exited, noticed = nil, time.After(s.ExitNoticed)
		case <-noticed:
			if observed {
				set(false)
			}
			return
		case <-tick.C:
		}
	}
}

// Remove takes ep out of the endpoints Propagation from now, as the
// deletion of its pod does: the kubelet sends SIGTERM while the endpoint's
// removal is on its way to kube-proxy.
func (s *Service) Remove(ep *Endpoint) {
	time.AfterFunc(s.Propagation, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, e := range s.endpoints {
			if e == ep {
				close(e.removed)
				s.endpoints = append(s.endpoints[:i], s.endpoints[i+1:]...)
				return
			}
		}
	})
}

// WaitReady waits until the Service sends connections to ep.
func (s *Service) WaitReady(ctx context.Context, ep *Endpoint) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return s.Ready(ep), nil
	})
	if err != nil {
		return fmt.Errorf("replica %s never became a ready endpoint: %w", ep.Name, err)
	}
	return nil
}

// Ready reports whether the Service sends new connections to ep.
func (s *Service) Ready(ep *Endpoint) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ep.ready
}

// Conns returns how many connections the Service has joined to ep that are
// still open: the apiserver's connections that a loss of ep cuts.
func (s *Service) Conns(ep *Endpoint) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ep.conns
}

// pick returns a ready endpoint, or nil when none is ready.
func (s *Service) pick() *Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ready []*Endpoint
	for _, ep := range s.endpoints {
		if ep.ready {
			ready = append(ready, ep)
		}
	}
	if len(ready) == 0 {
		return nil
	}
	return ready[rand.IntN(len(ready))]
}

func (s *Service) serve() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Go(func() { s.forward(conn) })
	}
}

// forward joins a connection to an endpoint until either side closes.
func (s *Service) forward(conn net.Conn) {
	defer conn.Close()
	ep := s.pick()
	if ep == nil {
		return
	}
	backend, err := net.Dial("tcp", ep.Addr)
	if err != nil {
		return
	}
	defer backend.Close()
	s.mu.Lock()
	s.conns[conn] = ep
	ep.conns++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		ep.conns--
		s.mu.Unlock()
	}()
	copied := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(backend, conn); copied <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, backend); copied <- struct{}{} }()
	<-copied
}

// readyzStatus returns the status a readiness URL answers, or an error
// when nothing answers there.
func readyzStatus(url string) (int, error) {
	if url == "" {
		return 0, errors.New("no readiness URL")
	}
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
