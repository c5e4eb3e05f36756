package playground

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
	"github.com/sidecarset/sidecarset/internal/realnode"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

const (
	demoNamespace = "demo"
	demoSet       = "mysql-exporter"
	demoReplicas  = 12
)

// The demo's images.
const (
	imageMySQL      = "mysql:8.4"
	imageExporter   = "prom/mysqld-exporter:v0.15.1"
	imageExporterV2 = "prom/mysqld-exporter:v0.16.0"
	// imageHandEdited is what someone sets a sidecar to by hand.
	imageHandEdited = "prom/mysqld-exporter:hand-edited"
)

// realImages are the demo's images as a real node imports them: busybox,
// each with /version holding its tag; the exporter's run the project's
// exporter (test/images/exporter), serving on the port the demo probes.
func realImages() []realnode.Image {
	images := []realnode.Image{{Ref: imageMySQL, Version: "8.4"}}
	for _, ref := range []string{imageExporter, imageExporterV2, imageHandEdited} {
		images = append(images, realnode.Image{Ref: ref, Version: ref[strings.LastIndex(ref, ":")+1:], Exporter: true})
	}
	return images
}

// demo tells the story of the project's source article on screen: a
// 12-replica database, a sidecar declared with partition 100%, a rollout
// walked down step by step, a hand edit detected as drift, and a non-image
// change counted as not upgradable. Each step runs the commands a user
// would type against the same kubeconfig and prints them with what they
// print: kubectl's run as kubectl itself, kubectl sidecarset's through its
// code. On a real node (realNode) the pods are fitted to it
// (realnode.FitPod).
type demo struct {
	c          client.Client
	out        io.Writer
	kubeconfig string
	// kubectlBin is the kubectl the demo runs.
	kubectlBin string
	realNode   bool
}

// runDemo runs the demo's steps; with pace set, it waits for a line from
// pace before each step after the first (see pacer).
func runDemo(ctx context.Context, env *testenv.Env, out io.Writer, kubeconfig string, realNode bool, pace io.Reader) error {
	assets, err := testenv.Assets()
	if err != nil {
		return err
	}
	d := &demo{c: env.Client, out: out, kubeconfig: kubeconfig, kubectlBin: filepath.Join(assets, "kubectl"), realNode: realNode}
	steps := []struct {
		title string
		run   func(context.Context) error
	}{
		{"A namespace whose pods get sidecars", d.namespace},
		{"Declare the exporter once, with partition 100% so nothing moves yet", d.declare},
		{"A 12-replica database; the webhook injects the exporter into every pod", d.database},
		{"A new exporter image: declared, but the partition holds every pod", d.newImage},
		{"Walk the partition down: 50%, then 0, one pod at a time", d.rollout},
		{"Someone edits a sidecar image by hand: counted as drifted", d.drift},
		{"A change other than the image: counted as not upgradable, nothing restarts", d.notUpgradable},
	}
	fmt.Fprintf(out, "\n=== Demo (skip it with --demo=false) ===\n")
	p := newPacer(pace, out)
	for i, s := range steps {
		if i > 0 {
			if err := p.wait(ctx, fmt.Sprintf("%d. %s", i+1, s.title)); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "\n--- %d. %s\n", i+1, s.title)
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, s.title, err)
		}
	}
	fmt.Fprintf(out, "\n=== Demo done. Everything above is still there: try the commands yourself. ===\n")
	return nil
}

// say prints a command as the user would type it.
func (d *demo) say(cmd string) {
	fmt.Fprintf(d.out, "$ %s\n", cmd)
}

// kubectl runs kubectl with args against the playground, as the user
// would, and prints the command and what it prints.
func (d *demo) kubectl(ctx context.Context, args ...string) error {
	d.say("kubectl " + strings.Join(quoted(args), " "))
	return d.run(ctx, "", args...)
}

// apply runs kubectl apply -f - with obj's manifest on its standard input,
// printed as a here-document.
func (d *demo) apply(ctx context.Context, obj any) error {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	manifest := strings.TrimSpace(stripEmpty(string(b)))
	d.say("kubectl apply -f - <<EOF\n" + manifest + "\nEOF")
	return d.run(ctx, manifest, "apply", "-f", "-")
}

func (d *demo) run(ctx context.Context, stdin string, args ...string) error {
	cmd := exec.CommandContext(ctx, d.kubectlBin, append([]string{"--kubeconfig", d.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	d.out.Write(out) //nolint:errcheck // the demo's output, as it is
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// quoted quotes for a shell the arguments that need it.
func quoted(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if strings.ContainsAny(a, " '\"{}[]()$*?;&|<>") {
			out[i] = "'" + a + "'"
		}
	}
	return out
}

func (d *demo) namespace(ctx context.Context) error {
	if err := d.kubectl(ctx, "create", "namespace", demoNamespace); err != nil {
		return err
	}
	return d.kubectl(ctx, "label", "namespace", demoNamespace, "example.com/managed=true")
}

func (d *demo) declare(ctx context.Context) error {
	exporter := corev1.Container{
		Name:  "exporter",
		Image: imageExporter,
		// The probe's initial delay makes the one-pod-at-a-time pace
		// visible.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9104)}},
			InitialDelaySeconds: 1,
			PeriodSeconds:       1,
		},
	}
	if d.realNode {
		realnode.FitContainer(&exporter)
	}
	set := &v1alpha1.SidecarSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "SidecarSet"},
		ObjectMeta: metav1.ObjectMeta{Name: demoSet},
		Spec: v1alpha1.SidecarSetSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/managed": "true"}},
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/mysql": "true"}},
			Containers:        []v1alpha1.SidecarContainer{{Container: exporter}},
			UpdateStrategy: v1alpha1.UpdateStrategy{
				Partition:      ptr.To(intstr.FromString("100%")),
				MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				// Each restarted pod holds its slot until its exporter has
				// been ready this long (10 s by default; shorter here so
				// the demo moves).
				MinReadySeconds: ptr.To[int32](3),
			},
		},
	}
	return d.apply(ctx, set)
}

func (d *demo) database(ctx context.Context) error {
	labels := map[string]string{"app": "mysql", "example.com/mysql": "true"}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: "mysql"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](demoReplicas),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "mysql", Image: imageMySQL,
					Resources: corev1.ResourceRequirements{},
				}}},
			},
		},
	}
	if d.realNode {
		realnode.FitPod(&sts.Spec.Template.Spec)
	}
	if err := d.apply(ctx, sts); err != nil {
		return err
	}
	if err := d.waitStatus(ctx, "12 pods injected and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == demoReplicas && s.UpdatedReadyPods == demoReplicas
	}); err != nil {
		return err
	}
	if err := d.kubectl(ctx, "-n", demoNamespace, "get", "pod", "mysql-0", "-o", `jsonpath={.spec.containers[*].name}{"\n"}`); err != nil {
		return err
	}
	return d.status(ctx)
}

func (d *demo) newImage(ctx context.Context) error {
	patch := `[{"op":"replace","path":"/spec/containers/0/image","value":"` + imageExporterV2 + `"}]`
	if err := d.kubectl(ctx, "patch", "sidecarset", demoSet, "--type=json", "-p", patch); err != nil {
		return err
	}
	if err := d.waitStatus(ctx, "the new revision observed", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == demoReplicas && s.UpdatedPods == 0
	}); err != nil {
		return err
	}
	return d.status(ctx)
}

func (d *demo) rollout(ctx context.Context) error {
	d.say("kubectl sidecarset rollout run mysql-exporter --steps 50%,0 --wait-ready 2m")
	err := cli.Run(ctx, d.c, d.out, cli.RunOptions{
		Name:            demoSet,
		Steps:           []intstr.IntOrString{intstr.FromString("50%"), intstr.FromInt32(0)},
		WaitReady:       2 * time.Minute,
		NotReadyTimeout: time.Minute,
		Interval:        200 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	if err := d.waitStatus(ctx, "12 updated and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.UpdatedReadyPods == demoReplicas
	}); err != nil {
		return err
	}
	d.say("kubectl sidecarset pods mysql-exporter")
	if err := cli.Pods(ctx, d.c, d.out, cli.PodsOptions{Name: demoSet, ManagerNamespace: "sidecarset-system"}); err != nil {
		return err
	}
	fmt.Fprintln(d.out, "The mysql containers never restarted; each exporter did, once:")
	return d.kubectl(ctx, "-n", demoNamespace, "get", "pods", "-o",
		"custom-columns=NAME:.metadata.name,CONTAINERS:.status.containerStatuses[*].name,RESTARTS:.status.containerStatuses[*].restartCount")
}

func (d *demo) drift(ctx context.Context) error {
	patch := `[{"op":"replace","path":"/spec/containers/0/image","value":"` + imageHandEdited + `"}]`
	if err := d.kubectl(ctx, "-n", demoNamespace, "patch", "pod", "mysql-3", "--type=json", "-p", patch); err != nil {
		return err
	}
	// The edited exporter restarts; shown once it is ready again.
	if err := d.waitStatus(ctx, "the drift counted", func(s v1alpha1.SidecarSetStatus) bool {
		return s.DriftedPods == 1 && s.ReadyPods == demoReplicas
	}); err != nil {
		return err
	}
	if err := d.status(ctx); err != nil {
		return err
	}
	fmt.Fprintln(d.out, "With driftPolicy: Revert the controller writes the declared image back.")
	return nil
}

func (d *demo) notUpgradable(ctx context.Context) error {
	patch := `[{"op":"add","path":"/spec/containers/0/env","value":[{"name":"DATA_SOURCE_NAME","value":"exporter@tcp(127.0.0.1:3306)/"}]}]`
	if err := d.kubectl(ctx, "patch", "sidecarset", demoSet, "--type=json", "-p", patch); err != nil {
		return err
	}
	if err := d.waitStatus(ctx, "pods counted not upgradable", func(s v1alpha1.SidecarSetStatus) bool {
		return s.NotUpgradablePods == demoReplicas && s.ReadyPods == demoReplicas
	}); err != nil {
		return err
	}
	if err := d.status(ctx); err != nil {
		return err
	}
	if err := d.kubectl(ctx, "-n", demoNamespace, "get", "pod", "mysql-0", "-o",
		`jsonpath={range .status.conditions[?(@.type=="`+string(v1alpha1.PodConditionUpgradable)+`")]}{.type}={.status} reason={.reason}: {.message}{"\n"}{end}`); err != nil {
		return err
	}
	fmt.Fprintln(d.out, "New pods get the env at once; running ones take it when they are recreated.")
	return nil
}

// status prints what `kubectl sidecarset status` shows.
func (d *demo) status(ctx context.Context) error {
	d.say("kubectl sidecarset status mysql-exporter")
	return cli.Status(ctx, d.c, d.out, cli.StatusOptions{Name: demoSet})
}

func (d *demo) waitStatus(ctx context.Context, what string, cond func(v1alpha1.SidecarSetStatus) bool) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		set := &v1alpha1.SidecarSet{}
		if err := d.c.Get(ctx, types.NamespacedName{Name: demoSet}, set); err != nil {
			return false, err
		}
		return set.Status.ObservedGeneration == set.Generation && cond(set.Status), nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s: %w", what, err)
	}
	return nil
}

// stripEmpty drops the empty status and creationTimestamp a marshalled
// object carries, so the printed manifest is what a user would write.
func stripEmpty(s string) string {
	var out []string
	skip := false
	for _, line := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(line, "status:"):
			skip = true
			continue
		case skip && strings.HasPrefix(line, " "):
			continue
		case strings.Contains(line, "creationTimestamp: null"):
			continue
		}
		skip = false
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
