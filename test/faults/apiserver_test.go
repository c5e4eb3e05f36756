package faults

import (
	"fmt"
	"testing"
	"time"
)

// TestAPIServerRestart: a rollout of 200 pods, maxUnavailable 10%,
// partition 100 → 0, by one manager process with leader election on, as
// the chart runs it, while kube-apiserver is stopped and started again
// twice, etcd running throughout, each when a drawn number of pods has
// been written: once after a pause of up to 300ms (anywhere in the
// reconcile that wrote the pod), once the moment the write is seen, while
// the manager is writing the rest of its batch. The apiserver stays down
// 0-2s, then takes its own start (it comes back on the same port with the
// same certificates: testenv.StartAPIServer). The manager's requests fail
// meanwhile and its watches end; it must ride that out or, if it exits (a
// Lease it could not renew within its 10s deadline), the test says so and
// starts it again, as the kubelet would. In the end the same checks as
// TestManagerKilled's: every pod written once, none past the partition,
// never more than 20 not Ready at any moment the watch saw, no app
// container restarted.
//
// Measured on 2 loaded cores (load average 12-14): the apiserver answers
// again 4.5-8.3s after it is stopped and the manager never exited. The
// rollout took 52s with these two restarts, and 2m14s and 2m38s in two
// runs with three, where its first 100 pods, before any restart, took 7s:
// after a restart the manager may stay quiet (no error logged, every pod
// Ready) for up to 100s before it writes the next batch, as if the
// SidecarSet waited out a long back-off from the reconciles that failed
// while the apiserver was down.
func TestAPIServerRestart(t *testing.T) {
	const pods, restarts = 200, 2
	steps := []int{100, 0}
	r := newRand(t)
	points := killPoints(r, restarts, pods, []int{pods - steps[0]})
	whileWriting := r.IntN(restarts)
	t.Logf("restart points (pods written): %v, the one at %d the moment it is seen", points, points[whileWriting])

	p := cluster.ManagerProcess(t)
	ro := newFaultRollout(t, pods)
	var downs []time.Duration
	exits := 0
	ro.run(t, steps, points, func(k int) {
		if k != whileWriting {
			time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond)
		}
		stopped := time.Now()
		if err := cluster.Env.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(r.IntN(2000)) * time.Millisecond)
		if err := cluster.Env.StartAPIServer(); err != nil {
			t.Fatal(err)
		}
		down := time.Since(stopped)
		downs = append(downs, down)
		t.Logf("restart %d at %d pods written: the apiserver answered again %v after it was stopped", k+1, points[k], down.Round(100*time.Millisecond))
		// A manager that lost its Lease exits at once; give it the
		// time of a renewal to show it.
		time.Sleep(2 * time.Second)
		select {
		case <-p.Endpoint("").Exited:
			exits++
			t.Logf("restart %d: the manager process exited (see its output): started again", k+1)
			if err := p.Start(t.Context()); err != nil {
				t.Fatalf("start the manager again: %v", err)
			}
		default:
		}
	})
	select {
	case <-p.Endpoint("").Exited:
		t.Error("the manager process had exited when the rollout ended")
	default:
	}
	if len(downs) != restarts {
		t.Errorf("%d restarts, want %d", len(downs), restarts)
	}
	ro.check(t)
	twice := ro.writtenTwice()
	t.Logf("faults: %d apiserver restarts (down %v), %d manager exits, rollout of %d pods in %v, %d pod versions watched (%d relists), at most %d pods not Ready at once (maxUnavailable %d), %d pods written twice",
		len(downs), roundAll(downs), exits, pods, ro.took.Round(time.Second), ro.log.events, ro.log.relists, ro.log.maxNotReady, ro.maxUnavailable(), twice)
	if !t.Failed() {
		results.add(map[string]any{"faults_apiserver_restarts": len(downs), "faults_apiserver_pods_written_twice": twice},
			"## kube-apiserver restarted mid-rollout (TestAPIServerRestart)",
			"",
			fmt.Sprintf("- restarts: %d, etcd running, one while the manager was writing; the apiserver down %v each time", len(downs), roundAll(downs)),
			fmt.Sprintf("- manager process exits: %d (the test starts an exited one again)", exits),
			fmt.Sprintf("- rollout of %d pods, partition %d → 0, maxUnavailable 10%% (%d): %v", pods, steps[0], ro.maxUnavailable(), ro.took.Round(time.Second)),
			fmt.Sprintf("- at most %d pods not Ready at once, 0 beyond the partition, over %d pod versions watched (the watch started again from a list %d times)", ro.log.maxNotReady, ro.log.events, ro.log.relists),
			fmt.Sprintf("- pods written twice: %d; every exporter restarted once, no app container restarted", twice),
		)
	}
}
