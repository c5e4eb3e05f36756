package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// Names the preflight probes use.
const (
	// LabelPreflight marks the probe SidecarSet, and selects the probe pods
	// by a random value.
	LabelPreflight = "sidecarset.dev/preflight"
	// AnnotationPreflightExpires on a probe SidecarSet is when its run
	// ends at the latest (RFC 3339); a later run deletes it after that.
	AnnotationPreflightExpires = "sidecarset.dev/preflight-expires"
	// PreflightContainer is the probe sidecar's name.
	PreflightContainer = "sidecarset-preflight-probe"
	preflightImage     = "registry.k8s.io/pause:3.10"
	// SidecarSetWebhook is the name of the manager's SidecarSet webhooks
	// (validating and defaulting), as admission errors name them.
	SidecarSetWebhook = "sidecarsets.sidecarset.dev"
)

// preflightSecurity makes the probe containers pass Pod Security
// "restricted", so that a namespace enforcing it does not refuse the probe
// for reasons of its own.
func preflightSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		RunAsNonRoot:             ptr.To(true),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// preflightResources are small requests and equal limits: a ResourceQuota
// on requests or limits refuses a pod without them.
func preflightResources() corev1.ResourceRequirements {
	r := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	return corev1.ResourceRequirements{Requests: r, Limits: r.DeepCopy()}
}

// NewCmdPreflight returns `preflight`.
func NewCmdPreflight(o *Options) *cobra.Command {
	opts := PreflightOptions{Timeout: time.Minute}
	cmd := &cobra.Command{
		Use:   "preflight [--timeout 60s] [-n NAMESPACE]",
		Short: "Check that the SidecarSet and pod webhooks answer",
		Long: `Check, from the apiserver's side, that the manager's webhooks answer:

  - SidecarSet validation: a server-side dry-run create of an invalid probe
    SidecarSet (empty selector, which only the webhook refuses) must be refused
    by the webhook. Accepted means no validating webhook is registered; an error
    calling it means it is registered but not answering.
  - pod injection: a probe SidecarSet selecting nothing but probe pods, and only
    in -n NAMESPACE (default "default"), is created for real (the pod webhook
    injects only SidecarSets it can see), then a server-side dry-run create of a
    probe pod there must come back with the probe sidecar injected. The probe
    SidecarSet is deleted afterwards, and probes that earlier runs left behind
    (killed before they could delete theirs) are deleted first.

The probe pod and its sidecar pass Pod Security "restricted" and carry small
requests and limits, so a namespace enforcing either checks the webhook, not
the probe. A refusal counts only when it comes from the manager's webhook
(` + SidecarSetWebhook + `); one from another webhook or admission plugin is
reported as such. Each check is retried until --timeout, as the webhooks may
still be starting. Exit 0 only when both answer.`,
		Example: `  # Right after installing the manager
  kubectl sidecarset preflight

  # In CI, against a namespace your workloads use, giving the manager 2 minutes
  kubectl sidecarset preflight -n shop --timeout 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Timeout <= 0 {
				return usageErrorf("--timeout %s: must be positive", opts.Timeout)
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			opts.Namespace = o.Namespace()
			opts.ManagerNamespace = o.ManagerNamespace
			opts.Interval = o.PollInterval
			return Preflight(cmd.Context(), c, o.Out, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", opts.Timeout, "How long to retry the checks")
	return exits(cmd, map[int]string{
		0: "both webhooks answer",
		1: "a webhook did not answer within --timeout, or another error",
		5: "",
	})
}

// PreflightOptions say where and how long Preflight probes.
type PreflightOptions struct {
	// Namespace is where the probe pod goes; empty means "default".
	Namespace        string
	ManagerNamespace string
	Timeout          time.Duration
	// Interval is the pause between tries.
	Interval time.Duration
}

// ErrPreflight is wrapped by Preflight's error when a webhook did not answer.
var ErrPreflight = errors.New("preflight failed")

// Preflight checks that the webhooks answer; see NewCmdPreflight.
func Preflight(ctx context.Context, c client.Client, out io.Writer, opts PreflightOptions) error {
	// Whatever preflight writes is a probe of its own that never runs, so
	// the admission warnings about it (an image by tag, no readiness probe)
	// say nothing to the user: collected, and dropped.
	ctx, _ = withWarnings(ctx)
	ns := opts.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	switch ns {
	case metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease, opts.ManagerNamespace:
		return fmt.Errorf("-n %s: the pod webhook never sees system namespaces or the manager's; give a namespace your workloads run in", ns)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err != nil {
		return fmt.Errorf("-n %s: the probe pod needs an existing namespace: %w", ns, err)
	}
	deadline := time.Now().Add(opts.Timeout)
	if err := cleanLeftovers(ctx, c, out, time.Now()); err != nil {
		return err
	}

	validating := retry(ctx, deadline, opts.Interval, func() (bool, string) { return probeValidation(ctx, c) })
	fmt.Fprintf(out, "SidecarSet validating webhook: %s\n", validating)

	pods := probeInjection(ctx, c, ns, deadline, opts.Interval)
	fmt.Fprintf(out, "pod mutating webhook: %s\n", pods)

	if validating.answered && pods.answered {
		_, err := fmt.Fprintln(out, "preflight passed: both webhooks answer")
		return err
	}
	return fmt.Errorf("%w: a webhook did not answer within --timeout %s", ErrPreflight, opts.Timeout)
}

// outcome is how one check ended.
type outcome struct {
	answered bool
	tries    int
	detail   string
}

func (o outcome) String() string {
	tries := "1 try"
	if o.tries != 1 {
		tries = fmt.Sprintf("%d tries", o.tries)
	}
	if o.answered {
		return fmt.Sprintf("answered (%s): %s", tries, o.detail)
	}
	return fmt.Sprintf("did NOT answer (%s): %s", tries, o.detail)
}

// retry runs try until it says answered or the deadline passes, and
// returns the last outcome.
func retry(ctx context.Context, deadline time.Time, interval time.Duration, try func() (bool, string)) outcome {
	var o outcome
	for {
		o.tries++
		o.answered, o.detail = try()
		if o.answered || !time.Now().Add(interval).Before(deadline) || sleep(ctx, interval) != nil {
			return o
		}
	}
}

// probeValidation dry-run creates a SidecarSet only the validating webhook
// refuses: the CRD schema allows an empty selector, validation does not.
func probeValidation(ctx context.Context, c client.Client) (bool, string) {
	probe := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "sidecarset-preflight-", Labels: map[string]string{LabelPreflight: "invalid"}},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: PreflightContainer, Image: preflightImage}}},
		},
	}
	err := c.Create(ctx, probe, client.DryRunAll)
	return judgeValidation(err)
}

// deniedBy finds the webhook that refused a request in the apiserver's
// message: `admission webhook "NAME" denied the request: ...`.
var deniedBy = regexp.MustCompile(`admission webhook "([^"]+)" denied the request`)

// judgeValidation reads the apiserver's answer to the invalid probe. Only
// the manager's webhook refusing it proves that webhook answers: another
// webhook may refuse first (mutating webhooks run in name order), and its
// "denied" says nothing about ours.
func judgeValidation(err error) (bool, string) {
	if err == nil {
		return false, "the apiserver accepted an invalid probe SidecarSet (empty selector): no validating webhook is registered for " + SidecarSetWebhook
	}
	if m := deniedBy.FindStringSubmatch(err.Error()); m != nil {
		if m[1] == SidecarSetWebhook {
			// Its message, "... is invalid: spec.selector ...", would read
			// as a failure of the check it passes.
			return true, "refused the invalid probe SidecarSet (empty selector, dry run), as it should"
		}
		return false, fmt.Sprintf("another admission webhook, %q, refused the probe SidecarSet before ours answered: %v", m[1], err)
	}
	if strings.Contains(err.Error(), "failed calling webhook") {
		return false, "registered but not answering: " + err.Error()
	}
	return false, "dry-run create of a probe SidecarSet failed: " + err.Error()
}

// judgePodRefusal says who refused a dry-run probe pod. The manager's pod
// webhook never refuses a pod (a SidecarSet never makes a pod's creation
// fail), so a refusal is always someone else's.
func judgePodRefusal(ns string, err error) string {
	msg := err.Error()
	switch m := deniedBy.FindStringSubmatch(msg); {
	case m != nil:
		return fmt.Sprintf("another admission webhook, %q, refused the probe pod, so the pod webhook's answer is unknown: %v", m[1], err)
	case apierrors.IsInternalError(err) || strings.Contains(msg, "failed calling webhook"):
		return "registered but not answering: " + msg
	case strings.Contains(msg, "violates PodSecurity"):
		return fmt.Sprintf("Pod Security admission of namespace %s refused the probe pod: %v", ns, err)
	case strings.Contains(msg, "exceeded quota") || strings.Contains(msg, "must specify"):
		return fmt.Sprintf("a ResourceQuota of namespace %s refused the probe pod: %v", ns, err)
	}
	return "dry-run create of a probe pod failed: " + msg
}

// cleanLeftovers deletes the probe SidecarSets of earlier runs that ended
// without deleting theirs (killed), once their run's time is over. Another
// run going on now keeps its probe: its expiry has not passed.
func cleanLeftovers(ctx context.Context, c client.Client, out io.Writer, now time.Time) error {
	var sets v1alpha1.SidecarSetList
	if err := c.List(ctx, &sets, client.MatchingLabels{LabelPreflight: "probe"}); err != nil {
		return fmt.Errorf("list probe SidecarSets left by earlier runs (label %s=probe): %w", LabelPreflight, err)
	}
	for i := range sets.Items {
		s := &sets.Items[i]
		expires, err := time.Parse(time.RFC3339, s.Annotations[AnnotationPreflightExpires])
		if s.DeletionTimestamp != nil || (err == nil && now.Before(expires)) {
			continue
		}
		if err := c.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete probe SidecarSet %s left by an earlier run: %w", s.Name, err)
		}
		fmt.Fprintf(out, "deleted probe SidecarSet %s, left by an earlier run\n", s.Name)
	}
	// The probe pods are dry runs: none is ever left behind, and a pod
	// carrying the label is someone else's to keep.
	return nil
}

// probeInjection creates a probe SidecarSet, dry-run creates probe pods
// until one comes back with the probe sidecar, and deletes the probe set.
func probeInjection(ctx context.Context, c client.Client, ns string, deadline time.Time, interval time.Duration) outcome {
	token := utilrand.String(10)
	set := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "sidecarset-preflight-", Labels: map[string]string{LabelPreflight: "probe"},
			// A leftover after this, should this run be killed; the
			// minute covers the deletion at the end.
			Annotations: map[string]string{AnnotationPreflightExpires: deadline.Add(time.Minute).UTC().Format(time.RFC3339)}},
		Spec: v1alpha1.SidecarSetSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{LabelPreflight: token}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{
				Name:            PreflightContainer,
				Image:           preflightImage,
				Resources:       preflightResources(),
				SecurityContext: preflightSecurity(),
			}}},
			// No running pod carries it; NotUpdate says so to the controller.
			UpdateStrategy: v1alpha1.UpdateStrategy{Type: v1alpha1.NotUpdateStrategy},
		},
	}
	created := retry(ctx, deadline, interval, func() (bool, string) {
		if err := c.Create(ctx, set); err != nil {
			return false, "could not create the probe SidecarSet, so injection was not tried: " + err.Error()
		}
		return true, ""
	})
	if !created.answered {
		return created
	}
	defer func() {
		// Deleted even when ctx was cancelled (Ctrl-C): a probe left behind
		// would only match probe pods, but should not linger.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.Delete(dctx, set)
	}()

	return retry(ctx, deadline, interval, func() (bool, string) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "sidecarset-preflight-", Namespace: ns, Labels: map[string]string{LabelPreflight: token}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: preflightImage,
					Resources: preflightResources(), SecurityContext: preflightSecurity()}},
				SecurityContext: &corev1.PodSecurityContext{
					RunAsNonRoot:   ptr.To(true),
					RunAsUser:      ptr.To[int64](65535),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				AutomountServiceAccountToken: ptr.To(false),
			},
		}
		if err := c.Create(ctx, pod, client.DryRunAll); err != nil {
			return false, judgePodRefusal(ns, err)
		}
		for _, ctr := range pod.Spec.Containers {
			if ctr.Name == PreflightContainer {
				return true, fmt.Sprintf("injected probe SidecarSet %s into a dry-run pod in namespace %s", set.Name, ns)
			}
		}
		return false, fmt.Sprintf("a dry-run pod in namespace %s came back without the probe sidecar: no pod webhook is registered for that namespace, or the manager has not seen probe SidecarSet %s", ns, set.Name)
	})
}
