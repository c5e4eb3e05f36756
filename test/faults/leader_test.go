package faults

import (
	"fmt"
	"testing"
	"time"
)

// TestLeaderHandover: two manager processes with leader election on, as
// the chart's Deployment of two replicas runs them (fixture.Replicas),
// through a rollout of 300 pods, maxUnavailable 10%, partition 150 → 0.
// The Lease changes hands four times under load, each at a drawn number
// of pods written: the leader is stopped with SIGTERM (it drains and
// gives the Lease up) or killed with SIGKILL (the Lease stays held until
// it expires), in turn, and started again once the other leads, as the
// kubelet restarts it. The rollout goes on under each new leader from
// where the pods and the set's status say it is: every pod written once,
// none past the partition, never more than 30 not Ready at any moment the
// watch saw, no app container restarted.
//
// The manager has no flags for the Lease's durations: it keeps
// controller-runtime's (15s lease, 10s renew deadline, 2s retry), so a
// SIGKILL costs the rollout 15-20s and a SIGTERM the leader's drain (5s)
// and a retry.
func TestLeaderHandover(t *testing.T) {
	const pods = 300
	signals := []string{"SIGTERM", "SIGKILL", "SIGTERM", "SIGKILL"}
	steps := []int{150, 0}
	r := newRand(t)
	points := killPoints(r, len(signals), pods, []int{pods - steps[0]})
	t.Logf("handover points (pods written): %v", points)

	replicas := cluster.ManagerReplicas(t, 2)
	ro := newFaultRollout(t, pods)
	leader := 0
	var took []time.Duration
	ro.run(t, steps, points, func(k int) {
		next := 1 - leader
		var from time.Time
		switch signals[k] {
		case "SIGTERM":
			from = replicas.Delete(leader)
		default:
			from = replicas.Kill(leader)
		}
		leads := replicas.WaitLeading(next)
		took = append(took, leads.Sub(from))
		t.Logf("handover %d at %d pods written: %s of replica %s, replica %s leads %v later",
			k+1, points[k], signals[k], replicas.Name(leader), replicas.Name(next), leads.Sub(from).Round(100*time.Millisecond))
		replicas.Start(leader)
		leader = next
	})
	for i, p := range replicas.Procs {
		select {
		case <-p.Endpoint("").Exited:
			t.Errorf("replica %s had exited when the rollout ended", replicas.Name(i))
		default:
		}
	}
	if len(took) != len(signals) {
		t.Errorf("%d handovers, want %d", len(took), len(signals))
	}
	ro.check(t)
	twice := ro.writtenTwice()
	t.Logf("faults: %d handovers (%v), rollout of %d pods in %v, %d pod versions watched, at most %d pods not Ready at once (maxUnavailable %d), %d pods written twice",
		len(took), roundAll(took), pods, ro.took.Round(time.Second), ro.log.events, ro.log.maxNotReady, ro.maxUnavailable(), twice)
	if !t.Failed() {
		results.add(map[string]any{"faults_leader_handovers": len(took), "faults_leader_pods_written_twice": twice},
			"## Leader handover under load (TestLeaderHandover)",
			"",
			fmt.Sprintf("- two replicas, %d handovers (%v in turn), the new leader holding the Lease %v after each signal", len(took), signals, roundAll(took)),
			fmt.Sprintf("- rollout of %d pods, partition %d → 0, maxUnavailable 10%% (%d): %v", pods, steps[0], ro.maxUnavailable(), ro.took.Round(time.Second)),
			fmt.Sprintf("- at most %d pods not Ready at once, 0 beyond the partition, over %d pod versions watched", ro.log.maxNotReady, ro.log.events),
			fmt.Sprintf("- pods written twice: %d; every exporter restarted once, no app container restarted", twice),
		)
	}
}

// roundAll rounds durations to a tenth of a second, for a report.
func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond)
	}
	return out
}
