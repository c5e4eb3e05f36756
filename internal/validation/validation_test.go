package validation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// mysqlExporter is the seed article's OpenKruise example after
// `kubectl sidecarset convert`, with a tag instead of the elided digest. Its
// volumeMount names the database pod's own volume, which the SidecarSet does
// not declare.
func mysqlExporter() *v1alpha1.SidecarSet {
	return &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "mysql-exporter"},
		Spec: v1alpha1.SidecarSetSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/managed": "true"}},
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/mysql": "true"}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{
				Name:         "exporter",
				Image:        "prom/mysqld-exporter:v0.15.1",
				VolumeMounts: []corev1.VolumeMount{{Name: "mysql", MountPath: "/var/lib/mysql"}},
			}}},
			UpdateStrategy: v1alpha1.UpdateStrategy{
				Type:           v1alpha1.RollingUpdateStrategy,
				Partition:      ptr.To(intstr.FromString("100%")),
				MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			},
		},
	}
}

// other returns a SidecarSet named name that selects the same pods and
// namespaces as mysqlExporter and declares one container.
func other(name, container string) *v1alpha1.SidecarSet {
	return &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/mysql": "true"}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: container, Image: "busybox:1.36"}}},
		},
	}
}

// hotOther is other with its container upgraded hot.
func hotOther(name, container string) *v1alpha1.SidecarSet {
	s := other(name, container)
	s.Spec.Containers[0].UpgradeStrategy = &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: "busybox:1"}
	return s
}

func sidecar(name, image string) v1alpha1.SidecarContainer {
	return v1alpha1.SidecarContainer{Container: corev1.Container{Name: name, Image: image}}
}

func always() *corev1.ContainerRestartPolicy {
	return ptr.To(corev1.ContainerRestartPolicyAlways)
}

func httpProbe(port int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(port)}}}
}

func configMapVolume(name, configMap string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}},
	}}
}

// errSummary is what a case asserts of each error: its type and field path.
type errSummary struct {
	Type  field.ErrorType
	Field string
}

func summarize(errs field.ErrorList) []errSummary {
	var out []errSummary
	for _, e := range errs {
		out = append(out, errSummary{e.Type, e.Field})
	}
	return out
}

func err(t field.ErrorType, path string) []errSummary {
	return []errSummary{{t, path}}
}

// errs joins several errors' summaries, in the order they are reported.
func errs(each ...[]errSummary) []errSummary {
	var out []errSummary
	for _, e := range each {
		out = append(out, e...)
	}
	return out
}

type validateCase struct {
	name   string
	modify func(s *v1alpha1.SidecarSet)
	others []*v1alpha1.SidecarSet
	opts   Options
	want   []errSummary
	// reason must appear in the errors' text; it pins down the message where
	// the reason matters to the user.
	reason string
}

func TestValidateCreateInvalid(t *testing.T) {
	cases := []validateCase{
		// metadata
		{
			name:   "name missing",
			modify: func(s *v1alpha1.SidecarSet) { s.Name = "" },
			want:   err(field.ErrorTypeRequired, "metadata.name"),
		},
		{
			name:   "name with upper case",
			modify: func(s *v1alpha1.SidecarSet) { s.Name = "MySQL" },
			want:   err(field.ErrorTypeInvalid, "metadata.name"),
			reason: "ControllerRevision names",
		},
		{
			name:   "name with a dot is a subdomain, not a label",
			modify: func(s *v1alpha1.SidecarSet) { s.Name = "mysql.exporter" },
			want:   err(field.ErrorTypeInvalid, "metadata.name"),
		},
		{
			name:   "name of 64 characters",
			modify: func(s *v1alpha1.SidecarSet) { s.Name = strings.Repeat("a", 64) },
			want:   err(field.ErrorTypeInvalid, "metadata.name"),
			reason: "must be no more than 63 characters",
		},
		{
			name: "allow-system-namespaces annotation neither true nor false",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Annotations = map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "yes"}
			},
			want:   err(field.ErrorTypeNotSupported, "metadata.annotations[sidecarset.dev/allow-system-namespaces]"),
			reason: `supported values: "true", "false"`,
		},

		// selectors
		{
			name:   "selector missing",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Selector = nil },
			want:   err(field.ErrorTypeRequired, "spec.selector"),
		},
		{
			name:   "selector empty",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Selector = &metav1.LabelSelector{} },
			want:   err(field.ErrorTypeInvalid, "spec.selector"),
			reason: "would inject into every pod",
		},
		{
			name: "selector with an unknown operator",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Like", Values: []string{"db"}}}
			},
			want: err(field.ErrorTypeInvalid, "spec.selector.matchExpressions[0].operator"),
		},
		{
			name: "selector In without values",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}
			},
			want: err(field.ErrorTypeRequired, "spec.selector.matchExpressions[0].values"),
		},
		{
			name:   "selector with an invalid label key",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Selector.MatchLabels = map[string]string{"-app": "db"} },
			want:   err(field.ErrorTypeInvalid, "spec.selector.matchLabels"),
		},
		{
			name: "namespaceSelector Exists with values",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists, Values: []string{"a"}}}
			},
			want: err(field.ErrorTypeForbidden, "spec.namespaceSelector.matchExpressions[0].values"),
		},
		{
			name: "updateStrategy.selector with an invalid label value",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "yes please"}}
			},
			want: err(field.ErrorTypeInvalid, "spec.updateStrategy.selector.matchLabels"),
		},

		// strategy and policies
		{
			name:   "updateStrategy.type unknown",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Type = "Recreate" },
			want:   err(field.ErrorTypeNotSupported, "spec.updateStrategy.type"),
			reason: `supported values: "RollingUpdate", "NotUpdate"`,
		},
		{
			name:   "partition negative",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(-1)) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.partition"),
			reason: "must be greater than or equal to 0",
		},
		{
			name:   "partition above 100%",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("150%")) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.partition"),
			reason: "between 0% and 100%",
		},
		{
			name:   "partition a word",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("half")) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.partition"),
			reason: `must be an integer or a percentage such as "50%"`,
		},
		{
			name:   "partition a number in a string",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("50")) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.partition"),
			reason: `must be an integer or a percentage such as "50%"`,
		},
		{
			name:   "partition a negative percentage",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("-5%")) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.partition"),
		},
		{
			name:   "partition a fraction",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("12.5%")) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.partition"),
		},
		{
			name:   "maxUnavailable 0",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(0)) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.maxUnavailable"),
			reason: "the rollout would never progress",
		},
		{
			name:   "maxUnavailable 0%",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString("0%")) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.maxUnavailable"),
			reason: "must be at least 1",
		},
		{
			name:   "maxUnavailable above 100%",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString("101%")) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.maxUnavailable"),
		},
		{
			name:   "maxUnavailable negative",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(-2)) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.maxUnavailable"),
		},
		{
			name:   "progressDeadlineSeconds 0",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.ProgressDeadlineSeconds = ptr.To[int32](0) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.progressDeadlineSeconds"),
		},
		{
			name:   "minReadySeconds negative",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.MinReadySeconds = ptr.To[int32](-1) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.minReadySeconds"),
		},
		{
			name: "minReadySeconds not below progressDeadlineSeconds",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy.MinReadySeconds = ptr.To[int32](60)
				s.Spec.UpdateStrategy.ProgressDeadlineSeconds = ptr.To[int32](60)
			},
			want: err(field.ErrorTypeInvalid, "spec.updateStrategy.minReadySeconds"),
		},
		{
			name:   "minReadySeconds not below the default progressDeadlineSeconds",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.MinReadySeconds = ptr.To[int32](600) },
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.minReadySeconds"),
		},
		{
			name: "priorityStrategy with both weightPriority and orderPriority",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{
					WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{{Weight: 10, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "replica"}}}},
					OrderPriority:  []v1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "shard"}},
				}
			},
			want:   err(field.ErrorTypeForbidden, "spec.updateStrategy.priorityStrategy.orderPriority"),
			reason: "only one of weightPriority and orderPriority",
		},
		{
			name: "weightPriority weight 0",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{
					WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{{Weight: 0, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "replica"}}}},
				}
			},
			want:   err(field.ErrorTypeInvalid, "spec.updateStrategy.priorityStrategy.weightPriority[0].weight"),
			reason: "between 1 and 100",
		},
		{
			name: "weightPriority with an empty selector",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{
					WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{{Weight: 5}},
				}
			},
			want: err(field.ErrorTypeRequired, "spec.updateStrategy.priorityStrategy.weightPriority[0].matchSelector"),
		},
		{
			name: "orderPriority key twice, and a key that is no label key",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{
					OrderPriority: []v1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "shard"}, {OrderedKey: "shard"}, {OrderedKey: "not a key"}},
				}
			},
			want: errs(err(field.ErrorTypeDuplicate, "spec.updateStrategy.priorityStrategy.orderPriority[1].orderedKey"),
				err(field.ErrorTypeInvalid, "spec.updateStrategy.priorityStrategy.orderPriority[2].orderedKey")),
		},
		{
			name: "scatterStrategy term twice, and one without a value",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy.ScatterStrategy = []v1alpha1.UpdateScatterTerm{{Key: "zone", Value: "a"}, {Key: "zone", Value: "a"}, {Key: "zone"}}
			},
			want: errs(err(field.ErrorTypeDuplicate, "spec.updateStrategy.scatterStrategy[1]"),
				err(field.ErrorTypeRequired, "spec.updateStrategy.scatterStrategy[2].value")),
		},
		{
			name:   "revisionHistoryLimit negative",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.RevisionHistoryLimit = ptr.To[int32](-1) },
			want:   err(field.ErrorTypeInvalid, "spec.revisionHistoryLimit"),
		},
		{
			name:   "driftPolicy unknown",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.DriftPolicy = "Ignore" },
			want:   err(field.ErrorTypeNotSupported, "spec.driftPolicy"),
			reason: `"Report", "Revert"`,
		},
		{
			name:   "adoptionPolicy unknown",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.AdoptionPolicy = "Always" },
			want:   err(field.ErrorTypeNotSupported, "spec.adoptionPolicy"),
			reason: `"Never", "SameName"`,
		},
		{
			name:   "jobPods unknown",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.JobPods = "Regular" },
			want:   err(field.ErrorTypeNotSupported, "spec.jobPods"),
			reason: `"NativeSidecar", "Keep"`,
		},

		{
			name: "injectionStrategy.revision names nothing",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{Policy: v1alpha1.InjectRevisionAlways}
			},
			want: err(field.ErrorTypeRequired, "spec.injectionStrategy.revision"),
		},
		{
			name: "injectionStrategy.revision names two",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{RevisionName: "s-abc", CustomVersion: "v1"}
			},
			want:   err(field.ErrorTypeInvalid, "spec.injectionStrategy.revision.customVersion"),
			reason: "not both",
		},
		{
			name: "injectionStrategy.revision bad names and policy",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{RevisionName: "S_1", Policy: "Sometimes"}
			},
			want: errs(err(field.ErrorTypeInvalid, "spec.injectionStrategy.revision.revisionName"),
				err(field.ErrorTypeNotSupported, "spec.injectionStrategy.revision.policy")),
		},
		{
			name: "injectionStrategy.revision customVersion not a label value",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{CustomVersion: "v 1"}
			},
			want: err(field.ErrorTypeInvalid, "spec.injectionStrategy.revision.customVersion"),
		},
		{
			name: "injectionStrategy.revision Partial with updateStrategy.selector",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{CustomVersion: "v1", Policy: v1alpha1.InjectRevisionPartial}
				s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}
			},
			want:   err(field.ErrorTypeInvalid, "spec.injectionStrategy.revision.policy"),
			reason: "status.matchedPods",
		},
		{
			name:   "customVersion not a label value",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.CustomVersion = "-v1" },
			want:   err(field.ErrorTypeInvalid, "spec.customVersion"),
		},

		// containers
		{
			name:   "no container at all",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers = nil },
			want:   err(field.ErrorTypeRequired, "spec.containers"),
		},
		{
			name:   "podInjectPolicy unknown",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].PodInjectPolicy = "Middle" },
			want:   err(field.ErrorTypeNotSupported, "spec.containers[0].podInjectPolicy"),
		},
		{
			name:   "container name missing",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Name = "" },
			want:   err(field.ErrorTypeRequired, "spec.containers[0].name"),
		},
		{
			name:   "container name not a DNS label",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Name = "Exporter_1" },
			want:   err(field.ErrorTypeInvalid, "spec.containers[0].name"),
		},
		{
			name: "HotUpgrade without an empty image",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].UpgradeStrategy = &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade}
			},
			want: err(field.ErrorTypeRequired, "spec.containers[0].upgradeStrategy.hotUpgradeEmptyImage"),
		},
		{
			name: "HotUpgrade whose empty image is the image",
			modify: func(s *v1alpha1.SidecarSet) {
				c := &s.Spec.Containers[0]
				c.UpgradeStrategy = &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: c.Image}
			},
			want:   err(field.ErrorTypeInvalid, "spec.containers[0].upgradeStrategy.hotUpgradeEmptyImage"),
			reason: "must differ from image",
		},
		{
			name: "an empty image without HotUpgrade",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].UpgradeStrategy = &v1alpha1.UpgradeStrategy{HotUpgradeEmptyImage: "busybox:1"}
			},
			want: err(field.ErrorTypeForbidden, "spec.containers[0].upgradeStrategy.hotUpgradeEmptyImage"),
		},
		{
			name: "upgradeType unknown",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].UpgradeStrategy = &v1alpha1.UpgradeStrategy{UpgradeType: "Warm"}
			},
			want: err(field.ErrorTypeNotSupported, "spec.containers[0].upgradeStrategy.upgradeType"),
		},
		{
			name: "HotUpgrade name too long for its slots",
			modify: func(s *v1alpha1.SidecarSet) {
				c := &s.Spec.Containers[0]
				c.Name = strings.Repeat("a", 62)
				c.UpgradeStrategy = &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: "busybox:1"}
			},
			want: err(field.ErrorTypeTooLong, "spec.containers[0].name"),
		},
		{
			name: "HotUpgrade slot named like another sidecar",
			modify: func(s *v1alpha1.SidecarSet) {
				c := &s.Spec.Containers[0]
				c.UpgradeStrategy = &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: "busybox:1"}
				s.Spec.Containers = append(s.Spec.Containers, sidecar(c.Name+"-2", "other:1"))
			},
			want: err(field.ErrorTypeDuplicate, "spec.containers[1].name"),
		},
		{
			name: "HotUpgrade with a hostPort",
			modify: func(s *v1alpha1.SidecarSet) {
				c := &s.Spec.Containers[0]
				c.UpgradeStrategy = &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: "busybox:1"}
				c.Ports = []corev1.ContainerPort{{ContainerPort: 9104, HostPort: 9104}}
			},
			want: err(field.ErrorTypeForbidden, "spec.containers[0].ports[0].hostPort"),
		},
		{
			name: "HotUpgrade on an init container",
			modify: func(s *v1alpha1.SidecarSet) {
				c := sidecar("log-shipper", "fluent-bit:3.1")
				c.RestartPolicy = always()
				c.UpgradeStrategy = &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: "busybox:1"}
				s.Spec.InitContainers = []v1alpha1.SidecarContainer{c}
			},
			want: err(field.ErrorTypeForbidden, "spec.initContainers[0].upgradeStrategy.upgradeType"),
		},
		{
			name:   "image missing",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "" },
			want:   err(field.ErrorTypeRequired, "spec.containers[0].image"),
		},
		{
			name:   "image with surrounding whitespace",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = " prom/mysqld-exporter:v0.15.1" },
			want:   err(field.ErrorTypeInvalid, "spec.containers[0].image"),
			reason: "leading or trailing whitespace",
		},
		{
			name: "same name twice in containers",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers = append(s.Spec.Containers, sidecar("exporter", "busybox:1.36"))
			},
			want: err(field.ErrorTypeDuplicate, "spec.containers[1].name"),
		},
		{
			name: "same name in containers and initContainers",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.InitContainers = []v1alpha1.SidecarContainer{sidecar("exporter", "busybox:1.36")}
			},
			want: err(field.ErrorTypeDuplicate, "spec.initContainers[0].name"),
		},
		{
			name:   "imagePullPolicy unknown",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].ImagePullPolicy = "Sometimes" },
			want:   err(field.ErrorTypeNotSupported, "spec.containers[0].imagePullPolicy"),
		},
		{
			name:   "terminationMessagePolicy unknown",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].TerminationMessagePolicy = "Stdout" },
			want:   err(field.ErrorTypeNotSupported, "spec.containers[0].terminationMessagePolicy"),
		},
		{
			name:   "containerPort 0",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 0}} },
			want:   err(field.ErrorTypeInvalid, "spec.containers[0].ports[0].containerPort"),
		},
		{
			name: "hostPort above 65535",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9104, HostPort: 70000}}
			},
			want: err(field.ErrorTypeInvalid, "spec.containers[0].ports[0].hostPort"),
		},
		{
			name: "port name twice",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9104}, {Name: "metrics", ContainerPort: 9105}}
			},
			want: err(field.ErrorTypeDuplicate, "spec.containers[0].ports[1].name"),
		},
		{
			name: "port name not an IANA service name",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http_metrics", ContainerPort: 9104}}
			},
			want: err(field.ErrorTypeInvalid, "spec.containers[0].ports[0].name"),
		},
		{
			name: "port protocol unknown",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9104, Protocol: "ICMP"}}
			},
			want: err(field.ErrorTypeNotSupported, "spec.containers[0].ports[0].protocol"),
		},
		{
			name:   "env name missing",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Env = []corev1.EnvVar{{Value: "x"}} },
			want:   err(field.ErrorTypeRequired, "spec.containers[0].env[0].name"),
		},
		{
			name:   "env name with '='",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A=B", Value: "x"}} },
			want:   err(field.ErrorTypeInvalid, "spec.containers[0].env[0].name"),
		},
		{
			name: "env with value and valueFrom",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NODE", Value: "x", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
				}}}
			},
			want: err(field.ErrorTypeInvalid, "spec.containers[0].env[0].valueFrom"),
		},
		{
			name: "env valueFrom with two sources",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{
					FieldRef:     &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"},
				}}}
			},
			want:   err(field.ErrorTypeInvalid, "spec.containers[0].env[0].valueFrom"),
			reason: "fieldRef, secretKeyRef",
		},
		{
			name: "env secretKeyRef without key",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "mysql"}},
				}}}
			},
			want: err(field.ErrorTypeRequired, "spec.containers[0].env[0].valueFrom.secretKeyRef.key"),
		},
		{
			name:   "envFrom without a source",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{Prefix: "X_"}} },
			want:   err(field.ErrorTypeInvalid, "spec.containers[0].envFrom[0]"),
		},
		{
			name: "request above limit",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				}
			},
			want:   err(field.ErrorTypeInvalid, "spec.containers[0].resources.requests[cpu]"),
			reason: "must be less than or equal to cpu limit of 100m",
		},
		{
			name: "negative limit",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Mi")}
			},
			want: err(field.ErrorTypeInvalid, "spec.containers[0].resources.limits[memory]"),
		},
		{
			name:   "volumeMount without mountPath",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].VolumeMounts[0].MountPath = "" },
			want:   err(field.ErrorTypeRequired, "spec.containers[0].volumeMounts[0].mountPath"),
		},
		{
			name: "two volumeMounts at one path",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].VolumeMounts = append(s.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "other", MountPath: "/var/lib/mysql"})
			},
			want: err(field.ErrorTypeInvalid, "spec.containers[0].volumeMounts[1].mountPath"),
		},
		{
			name:   "volumeMount subPath escaping the volume",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].VolumeMounts[0].SubPath = "data/../../etc" },
			want:   err(field.ErrorTypeInvalid, "spec.containers[0].volumeMounts[0].subPath"),
		},
		{
			name:   "volumeMount subPath absolute",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].VolumeMounts[0].SubPath = "/etc" },
			want:   err(field.ErrorTypeInvalid, "spec.containers[0].volumeMounts[0].subPath"),
		},
		{
			name: "volumeDevice without devicePath",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "raw"}}
			},
			want: err(field.ErrorTypeRequired, "spec.containers[0].volumeDevices[0].devicePath"),
		},
		{
			name:   "probe without a handler",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 5} },
			want:   err(field.ErrorTypeRequired, "spec.containers[0].readinessProbe"),
		},
		{
			name: "probe with two handlers",
			modify: func(s *v1alpha1.SidecarSet) {
				p := httpProbe(9104)
				p.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(9104)}
				s.Spec.Containers[0].LivenessProbe = p
			},
			want: err(field.ErrorTypeForbidden, "spec.containers[0].livenessProbe.tcpSocket"),
		},
		{
			name: "liveness successThreshold above 1",
			modify: func(s *v1alpha1.SidecarSet) {
				p := httpProbe(9104)
				p.SuccessThreshold = 2
				s.Spec.Containers[0].LivenessProbe = p
			},
			want: err(field.ErrorTypeInvalid, "spec.containers[0].livenessProbe.successThreshold"),
		},
		{
			name: "probe periodSeconds negative",
			modify: func(s *v1alpha1.SidecarSet) {
				p := httpProbe(9104)
				p.PeriodSeconds = -1
				s.Spec.Containers[0].ReadinessProbe = p
			},
			want: err(field.ErrorTypeInvalid, "spec.containers[0].readinessProbe.periodSeconds"),
		},
		{
			name:   "probe httpGet port 0",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].ReadinessProbe = httpProbe(0) },
			want:   err(field.ErrorTypeInvalid, "spec.containers[0].readinessProbe.httpGet.port"),
		},
		{
			name: "preStop hook without a handler",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{}}
			},
			want: err(field.ErrorTypeRequired, "spec.containers[0].lifecycle.preStop"),
		},
		{
			name:   "restartPolicy on a regular sidecar",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].RestartPolicy = always() },
			want:   err(field.ErrorTypeForbidden, "spec.containers[0].restartPolicy"),
			reason: "declare it under initContainers with restartPolicy: Always",
		},
		{
			name: "restartPolicyRules",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart}}
			},
			want: err(field.ErrorTypeForbidden, "spec.containers[0].restartPolicyRules"),
		},

		// init containers
		{
			name: "init container restartPolicy Never",
			modify: func(s *v1alpha1.SidecarSet) {
				c := sidecar("setup", "busybox:1.36")
				c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
				s.Spec.InitContainers = []v1alpha1.SidecarContainer{c}
			},
			want:   err(field.ErrorTypeNotSupported, "spec.initContainers[0].restartPolicy"),
			reason: `supported values: "Always"`,
		},
		{
			name: "init container restartPolicy OnFailure",
			modify: func(s *v1alpha1.SidecarSet) {
				c := sidecar("setup", "busybox:1.36")
				c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyOnFailure)
				s.Spec.InitContainers = []v1alpha1.SidecarContainer{c}
			},
			want: err(field.ErrorTypeNotSupported, "spec.initContainers[0].restartPolicy"),
		},
		{
			name: "plain init container with a readiness probe",
			modify: func(s *v1alpha1.SidecarSet) {
				c := sidecar("setup", "busybox:1.36")
				c.ReadinessProbe = httpProbe(8080)
				s.Spec.InitContainers = []v1alpha1.SidecarContainer{c}
			},
			want:   err(field.ErrorTypeForbidden, "spec.initContainers[0].readinessProbe"),
			reason: "without restartPolicy: Always",
		},
		{
			name: "plain init container with a startup probe",
			modify: func(s *v1alpha1.SidecarSet) {
				c := sidecar("setup", "busybox:1.36")
				c.StartupProbe = httpProbe(8080)
				s.Spec.InitContainers = []v1alpha1.SidecarContainer{c}
			},
			want: err(field.ErrorTypeForbidden, "spec.initContainers[0].startupProbe"),
		},
		{
			name: "plain init container with a lifecycle hook",
			modify: func(s *v1alpha1.SidecarSet) {
				c := sidecar("setup", "busybox:1.36")
				c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
				s.Spec.InitContainers = []v1alpha1.SidecarContainer{c}
			},
			want: err(field.ErrorTypeForbidden, "spec.initContainers[0].lifecycle"),
		},
		{
			name: "native sidecar's probe is still checked",
			modify: func(s *v1alpha1.SidecarSet) {
				c := sidecar("log-shipper", "fluent-bit:3.1")
				c.RestartPolicy = always()
				c.StartupProbe = &corev1.Probe{}
				s.Spec.InitContainers = []v1alpha1.SidecarContainer{c}
			},
			want: err(field.ErrorTypeRequired, "spec.initContainers[0].startupProbe"),
		},

		// volumes and pull secrets
		{
			name:   "volume name not a DNS label",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Volumes = []corev1.Volume{configMapVolume("My_Config", "cfg")} },
			want:   err(field.ErrorTypeInvalid, "spec.volumes[0].name"),
		},
		{
			name: "volume name twice",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Volumes = []corev1.Volume{configMapVolume("config", "a"), configMapVolume("config", "b")}
			},
			want: err(field.ErrorTypeDuplicate, "spec.volumes[1].name"),
		},
		{
			name: "volume with two sources",
			modify: func(s *v1alpha1.SidecarSet) {
				v := configMapVolume("config", "cfg")
				v.Secret = &corev1.SecretVolumeSource{SecretName: "s"}
				s.Spec.Volumes = []corev1.Volume{v}
			},
			// VolumeSource declares secret before configMap.
			want:   err(field.ErrorTypeForbidden, "spec.volumes[0].configMap"),
			reason: "may not specify more than 1 volume type; secret is already set",
		},
		{
			name:   "configMap volume without a ConfigMap name",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Volumes = []corev1.Volume{configMapVolume("config", "")} },
			want:   err(field.ErrorTypeRequired, "spec.volumes[0].configMap.name"),
		},
		{
			name:   "imagePullSecret without a name",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{}} },
			want:   err(field.ErrorTypeRequired, "spec.imagePullSecrets[0].name"),
		},

		// system namespaces
		{
			name: "namespaceSelector only kube-system by matchLabels",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}}
			},
			want:   err(field.ErrorTypeForbidden, "spec.namespaceSelector"),
			reason: `without the annotation sidecarset.dev/allow-system-namespaces: "true"`,
		},
		{
			name: "namespaceSelector In over system names only",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{"kube-public", "kube-node-lease"},
				}}}
			},
			want: err(field.ErrorTypeForbidden, "spec.namespaceSelector"),
		},
		{
			name: "namespaceSelector only the manager's namespace",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "sidecarset-system"}}
			},
			opts:   Options{ManagerNamespace: "sidecarset-system"},
			want:   err(field.ErrorTypeForbidden, "spec.namespaceSelector"),
			reason: "sidecarset-system",
		},
		{
			name: "annotation false is no permission",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Annotations = map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "false"}
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}}
			},
			want: err(field.ErrorTypeForbidden, "spec.namespaceSelector"),
		},

		// conflicts with other SidecarSets
		{
			name:   "container name declared by an overlapping SidecarSet",
			modify: func(*v1alpha1.SidecarSet) {},
			others: []*v1alpha1.SidecarSet{other("other", "exporter")},
			want:   err(field.ErrorTypeForbidden, "spec.containers[0].name"),
			reason: `conflicts with SidecarSet "other", which can select the same pods and also declares container "exporter"`,
		},
		{
			name:   "container name one of an overlapping SidecarSet's HotUpgrade slots",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Name = "proxy-1" },
			others: []*v1alpha1.SidecarSet{hotOther("mesh", "proxy")},
			want:   err(field.ErrorTypeForbidden, "spec.containers[0].name"),
			reason: `declares container "proxy-1" (a HotUpgrade sidecar NAME runs as containers NAME-1 and NAME-2)`,
		},
		{
			name: "init container name declared as a container by an overlapping SidecarSet",
			modify: func(s *v1alpha1.SidecarSet) {
				c := sidecar("log-shipper", "fluent-bit:3.1")
				c.RestartPolicy = always()
				s.Spec.InitContainers = []v1alpha1.SidecarContainer{c}
			},
			others: []*v1alpha1.SidecarSet{other("logging", "log-shipper")},
			want:   err(field.ErrorTypeForbidden, "spec.initContainers[0].name"),
			reason: `SidecarSet "logging"`,
		},
		{
			name: "overlap through Exists against matchLabels",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: "example.com/mysql", Operator: metav1.LabelSelectorOpExists,
				}}}
			},
			others: []*v1alpha1.SidecarSet{other("other", "exporter")},
			want:   err(field.ErrorTypeForbidden, "spec.containers[0].name"),
		},
		{
			name: "volume declared differently by an overlapping SidecarSet",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Volumes = []corev1.Volume{configMapVolume("config", "exporter-config")}
			},
			others: func() []*v1alpha1.SidecarSet {
				o := other("other", "agent")
				o.Spec.Volumes = []corev1.Volume{configMapVolume("config", "agent-config")}
				return []*v1alpha1.SidecarSet{o}
			}(),
			want:   err(field.ErrorTypeForbidden, "spec.volumes[0].name"),
			reason: `declares volume "config" differently`,
		},
		{
			name:   "conflicts with two SidecarSets, reported in name order",
			modify: func(*v1alpha1.SidecarSet) {},
			others: []*v1alpha1.SidecarSet{other("zeta", "exporter"), other("alpha", "exporter")},
			want: []errSummary{
				{field.ErrorTypeForbidden, "spec.containers[0].name"},
				{field.ErrorTypeForbidden, "spec.containers[0].name"},
			},
			reason: `SidecarSet "alpha", which can select the same pods and also declares container "exporter", ` +
				`spec.containers[0].name: Forbidden: conflicts with SidecarSet "zeta"`,
		},
	}
	runValidateCreate(t, cases)
	if len(cases) < 40 {
		t.Errorf("only %d invalid cases", len(cases))
	}
}

func TestValidateCreateValid(t *testing.T) {
	runValidateCreate(t, []validateCase{
		{
			name:   "the converted OpenKruise example, mounting a volume of the pod",
			modify: func(*v1alpha1.SidecarSet) {},
		},
		{
			name: "a HotUpgrade sidecar",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].UpgradeStrategy = &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: "busybox:1.36"}
			},
		},
		{
			name: "priorityStrategy and scatterStrategy",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{
					WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{{Weight: 100, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "replica"}}}},
				}
				s.Spec.UpdateStrategy.ScatterStrategy = []v1alpha1.UpdateScatterTerm{{Key: "topology.kubernetes.io/zone", Value: "eu-1a"}}
			},
		},
		{
			name: "partition together with updateStrategy.selector",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("50%"))
				s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
			},
		},
		{
			name: "boundary values of partition and maxUnavailable",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("0%"))
				s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString("100%"))
			},
		},
		{
			name: "integer partition larger than any pod count, and 1% maxUnavailable",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(1000))
				s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString("1%"))
			},
		},
		{
			name: "fully defaulted",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Volumes = []corev1.Volume{{Name: "scratch"}}
				Default(s)
			},
		},
		{
			name: "native sidecar with probes and hooks, plain init container, regular sidecar with probes",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9104}}
				s.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("metrics")},
				}}
				s.Spec.Containers[0].PodInjectPolicy = v1alpha1.AfterAppContainer
				native := sidecar("log-shipper", "fluent-bit:3.1")
				native.RestartPolicy = always()
				native.ReadinessProbe = httpProbe(2020)
				native.LivenessProbe = httpProbe(2020)
				native.StartupProbe = httpProbe(2020)
				native.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
				s.Spec.InitContainers = []v1alpha1.SidecarContainer{sidecar("setup", "busybox:1.36"), native}
			},
		},
		{
			name: "only init containers",
			modify: func(s *v1alpha1.SidecarSet) {
				native := sidecar("log-shipper", "fluent-bit:3.1")
				native.RestartPolicy = always()
				s.Spec.Containers = nil
				s.Spec.InitContainers = []v1alpha1.SidecarContainer{native}
			},
		},
		{
			name: "env names the apiserver accepts since relaxed validation",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "app.config-path", Value: "/etc"}, {Name: "1ST", Value: "x"}}
			},
		},
		{
			name: "requests equal to limits",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("65536Ki")},
				}
			},
		},
		{
			name: "system namespace with the annotation",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Annotations = map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "true"}
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}}
			},
		},
		{
			name: "namespaceSelector over system and other namespaces",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{"kube-system", "shop"},
				}}}
			},
		},
		{
			name: "namespaceSelector that contradicts itself is not called system-only",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{
					MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{
						Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpDoesNotExist,
					}},
				}
			},
		},
		{
			name: "the manager's namespace is ordinary when the manager runs elsewhere",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "sidecarset-system"}}
			},
			opts: Options{ManagerNamespace: "other-system"},
		},
		{
			name:   "same container name in a SidecarSet selecting other pods",
			modify: func(*v1alpha1.SidecarSet) {},
			others: func() []*v1alpha1.SidecarSet {
				o := other("postgres-exporter", "exporter")
				o.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/mysql": "false"}}
				return []*v1alpha1.SidecarSet{o}
			}(),
		},
		{
			name:   "same container name in a SidecarSet selecting other namespaces",
			modify: func(*v1alpha1.SidecarSet) {},
			others: func() []*v1alpha1.SidecarSet {
				o := other("other", "exporter")
				o.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: "example.com/managed", Operator: metav1.LabelSelectorOpDoesNotExist,
				}}}
				return []*v1alpha1.SidecarSet{o}
			}(),
		},
		{
			name:   "same container name in a SidecarSet confined to system namespaces",
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.NamespaceSelector = nil },
			others: func() []*v1alpha1.SidecarSet {
				o := other("system-exporter", "exporter")
				o.Annotations = map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "true"}
				o.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}}
				return []*v1alpha1.SidecarSet{o}
			}(),
		},
		{
			name: "same volume, same definition, in an overlapping SidecarSet",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Volumes = []corev1.Volume{configMapVolume("config", "shared-config")}
			},
			others: func() []*v1alpha1.SidecarSet {
				o := other("other", "agent")
				o.Spec.Volumes = []corev1.Volume{configMapVolume("config", "shared-config")}
				return []*v1alpha1.SidecarSet{o}
			}(),
		},
		{
			name:   "an entry for the set itself among the others is ignored",
			modify: func(*v1alpha1.SidecarSet) {},
			others: []*v1alpha1.SidecarSet{mysqlExporter()},
		},
		{
			name: "customVersion, and injectionStrategy.revision Partial by custom version",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.CustomVersion = "v2"
				s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{CustomVersion: "v1", Policy: v1alpha1.InjectRevisionPartial}
			},
		},
		{
			name: "injectionStrategy.revision Always by name, with updateStrategy.selector",
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{RevisionName: "mysql-exporter-5d8c7f9b2x", Policy: v1alpha1.InjectRevisionAlways}
				s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
			},
		},
	})
}

func runValidateCreate(t *testing.T, cases []validateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := mysqlExporter()
			tc.modify(set)
			before := set.DeepCopy()
			othersBefore := deepCopyAll(tc.others)

			errs := ValidateCreate(set, tc.others, tc.opts)

			if diff := cmp.Diff(tc.want, summarize(errs)); diff != "" {
				t.Errorf("ValidateCreate errors (-want +got):\n%s\nfull: %v", diff, errs)
			}
			if tc.reason != "" && !strings.Contains(errs.ToAggregate().Error(), tc.reason) {
				t.Errorf("ValidateCreate errors %q do not say %q", errs.ToAggregate(), tc.reason)
			}
			if diff := cmp.Diff(before, set); diff != "" {
				t.Errorf("ValidateCreate modified the set (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(othersBefore, tc.others); diff != "" {
				t.Errorf("ValidateCreate modified the others (-before +after):\n%s", diff)
			}
		})
	}
}

func deepCopyAll(sets []*v1alpha1.SidecarSet) []*v1alpha1.SidecarSet {
	if sets == nil {
		return nil
	}
	out := make([]*v1alpha1.SidecarSet, len(sets))
	for i, s := range sets {
		out[i] = s.DeepCopy()
	}
	return out
}

func TestValidateUpdate(t *testing.T) {
	withOld := func(modify func(s *v1alpha1.SidecarSet)) *v1alpha1.SidecarSet {
		s := mysqlExporter()
		modify(s)
		return s
	}
	cases := []struct {
		name   string
		old    *v1alpha1.SidecarSet
		modify func(s *v1alpha1.SidecarSet)
		others []*v1alpha1.SidecarSet
		opts   Options
		want   []errSummary
	}{
		{
			name:   "image-only update",
			old:    mysqlExporter(),
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "prom/mysqld-exporter:v0.16.0" },
		},
		{
			name:   "an update re-runs create validation",
			old:    mysqlExporter(),
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "" },
			want:   err(field.ErrorTypeRequired, "spec.containers[0].image"),
		},
		{
			name: "an update that adds a conflict is refused",
			old:  mysqlExporter(),
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers = append(s.Spec.Containers, sidecar("agent", "agent:1"))
			},
			others: []*v1alpha1.SidecarSet{other("monitoring", "agent")},
			want:   err(field.ErrorTypeForbidden, "spec.containers[1].name"),
		},
		{
			name: "renaming a container is allowed: it only makes running pods not upgradable",
			old:  mysqlExporter(),
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Name = "mysql-exporter"
				s.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9104}}
			},
		},
		{
			name:   "moving a container to initContainers is allowed",
			old:    mysqlExporter(),
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.InitContainers, s.Spec.Containers = s.Spec.Containers, nil },
		},
		{
			name:   "a metadata-only update of a SidecarSet stored invalid is not refused",
			old:    withOld(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(0)) }),
			modify: func(s *v1alpha1.SidecarSet) { s.Finalizers = nil; s.Labels = map[string]string{"team": "db"} },
			others: []*v1alpha1.SidecarSet{other("other", "exporter")},
		},
		{
			name:   "a conflict the old SidecarSet already had does not block an image fix",
			old:    mysqlExporter(),
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "prom/mysqld-exporter:v0.16.0" },
			others: []*v1alpha1.SidecarSet{other("other", "exporter")},
		},
		{
			name: "an old conflict is still not reported when its index moves; a new one is",
			old:  mysqlExporter(),
			modify: func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers = append([]v1alpha1.SidecarContainer{sidecar("agent", "agent:1")}, s.Spec.Containers...)
			},
			others: []*v1alpha1.SidecarSet{other("other", "exporter"), other("monitoring", "agent")},
			want:   err(field.ErrorTypeForbidden, "spec.containers[0].name"),
		},
		{
			name: "removing the allow annotation from a system-only SidecarSet is refused",
			old: withOld(func(s *v1alpha1.SidecarSet) {
				s.Annotations = map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "true"}
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}}
			}),
			modify: func(s *v1alpha1.SidecarSet) { delete(s.Annotations, v1alpha1.AnnotationAllowSystemNamespaces) },
			want:   err(field.ErrorTypeForbidden, "spec.namespaceSelector"),
		},
		{
			name: "a SidecarSet that became system-only when the manager moved can still be updated",
			old: withOld(func(s *v1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "sidecarset-system"}}
			}),
			modify: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "prom/mysqld-exporter:v0.16.0" },
			opts:   Options{ManagerNamespace: "sidecarset-system"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			newSet := tc.old.DeepCopy()
			newSet.Finalizers = []string{"example.com/keep"}
			tc.old.Finalizers = []string{"example.com/keep"}
			tc.modify(newSet)
			oldBefore, newBefore := tc.old.DeepCopy(), newSet.DeepCopy()

			errs := ValidateUpdate(tc.old, newSet, tc.others, tc.opts)

			if diff := cmp.Diff(tc.want, summarize(errs)); diff != "" {
				t.Errorf("ValidateUpdate errors (-want +got):\n%s\nfull: %v", diff, errs)
			}
			if diff := cmp.Diff(oldBefore, tc.old); diff != "" {
				t.Errorf("ValidateUpdate modified the old set (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(newBefore, newSet); diff != "" {
				t.Errorf("ValidateUpdate modified the new set (-before +after):\n%s", diff)
			}
		})
	}
}

// TestValidateIntOrPercentOverflow pins down that a percentage too large for
// an int is refused rather than wrapped into range.
func TestValidateIntOrPercentOverflow(t *testing.T) {
	for _, v := range []string{"9223372036854775807%", "99999999999999999999%", "92233720368547758%"} {
		errs := validateIntOrPercent(ptr.To(intstr.FromString(v)), 0, field.NewPath("p"), "too low")
		if diff := cmp.Diff(err(field.ErrorTypeInvalid, "p"), summarize(errs)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", v, diff)
		}
	}
}
