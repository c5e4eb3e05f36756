package status

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// PodConditionDrifted is the pod condition that is True while a managed
// sidecar's image differs from what its SidecarSet wrote.
const PodConditionDrifted corev1.PodConditionType = "SidecarSetDrifted"

// Reasons of the pod conditions besides v1alpha1.ReasonUpdateImmutableField.
const (
	// ReasonInPlace: SidecarSetUpgradable=True, no set needs a recreate.
	ReasonInPlace = "InPlace"
	// ReasonImageChangedByHand: SidecarSetDrifted=True.
	ReasonImageChangedByHand = "ImageChangedByHand"
	// ReasonAsWritten: SidecarSetDrifted=False.
	ReasonAsWritten = "AsWritten"
)

// PodVerdict is what one SidecarSet found about one pod it carries.
type PodVerdict struct {
	// NotUpgradable: the set changed more than images since the pod's
	// revision; the pod needs a recreate to take it.
	NotUpgradable bool
	// Drifted names the set's containers whose image was changed by hand,
	// in record order; empty when none.
	Drifted []string
}

// PodConditionsUpdate is what PodConditions decided.
type PodConditionsUpdate struct {
	// Conditions is the pod's whole condition list as it should be: a new
	// slice, the input's other conditions untouched and in place.
	Conditions []corev1.PodCondition
	// Changed: Conditions differs from the input; the pod must be written.
	Changed bool
	// NewlyNotUpgradable and NewlyDrifted: this set's own verdict turned
	// from clear to raised, which is worth an event. A change among the
	// other sets' verdicts, or in this set's drifted containers, is not.
	NewlyNotUpgradable, NewlyDrifted bool
}

// The messages of the raised conditions end in these prefixes followed by
// the verdicts, so that each set can find and update its own entry.
const (
	notUpgradablePrefix = "changed by these SidecarSets in more than images, so the pod needs a recreate to take them: "
	driftedPrefix       = "sidecar images changed by hand, unlike what these SidecarSets wrote: "
)

// PodConditions returns the pod conditions SidecarSetUpgradable and
// SidecarSetDrifted of a pod whose conditions are current, after set
// judged it as v.
//
// A pod has one condition of each type however many sets it carries, and
// each set's reconcile knows only its own verdict. So the message of a
// raised condition lists every set's verdict, sorted by set name and
// separated by "; ", a drifted set with its containers in parentheses:
//
//	SidecarSetUpgradable=False UpdateImmutableField "changed by these SidecarSets in more than images, so the pod needs a recreate to take them: a; b"
//	SidecarSetDrifted=True     ImageChangedByHand   "sidecar images changed by hand, unlike what these SidecarSets wrote: a (exporter); b (log, proxy)"
//
// A set adds, updates or removes only its own entry, and the condition is
// raised while the list is not empty; cleared, it reads
// SidecarSetUpgradable=True InPlace or SidecarSetDrifted=False AsWritten.
// Every set reaches the same condition from the others' entries, so with
// nothing changing no set writes again: the merge converges after one
// write per set. A raised condition in the form of earlier releases
// ("SidecarSet b changed more than images; …", "SidecarSet b: image of …")
// counts as b's entry; one in any other form as no entry.
//
// LastTransitionTime is now when the status flips (or the condition is
// new), and kept otherwise. A set with nothing to report adds no condition
// to a pod that has none.
//
// Worked cases, set a judging, now t1, conditions written at t0:
//
//	no conditions,                a clear          → nothing to write
//	no conditions,                a not upgradable → Upgradable=False "…: a" at t1, newly
//	Upgradable=False "…: b",      a not upgradable → False "…: a; b" at t0, newly
//	Upgradable=False "…: a; b",   a not upgradable → nothing to write
//	Upgradable=False "…: a; b",   a clear          → False "…: b" at t0
//	Upgradable=False "…: a",      a clear          → True InPlace at t1
//	Drifted=True "…: a (exporter)", a drifted exporter, log → True "…: a (exporter, log)" at t0, not newly
func PodConditions(current []corev1.PodCondition, set string, v PodVerdict, now metav1.Time) PodConditionsUpdate {
	out := PodConditionsUpdate{Conditions: slices.Clone(current)}
	var changed bool
	changed, out.NewlyNotUpgradable = notUpgradable.apply(&out.Conditions, set, "", v.NotUpgradable, now)
	out.Changed = changed
	changed, out.NewlyDrifted = drifted.apply(&out.Conditions, set, strings.Join(v.Drifted, ", "), len(v.Drifted) > 0, now)
	out.Changed = out.Changed || changed
	return out
}

// podCondition describes one of the two condition types: how it reads
// raised (some set's entry is listed) and cleared.
type podCondition struct {
	typ                    corev1.PodConditionType
	raised, cleared        corev1.ConditionStatus
	raisedReason, prefix   string
	clearedReason, message string
}

var (
	notUpgradable = podCondition{
		typ: v1alpha1.PodConditionUpgradable, raised: corev1.ConditionFalse, cleared: corev1.ConditionTrue,
		raisedReason: v1alpha1.ReasonUpdateImmutableField, prefix: notUpgradablePrefix,
		clearedReason: ReasonInPlace, message: "every SidecarSet can update this pod's sidecars in place",
	}
	drifted = podCondition{
		typ: PodConditionDrifted, raised: corev1.ConditionTrue, cleared: corev1.ConditionFalse,
		raisedReason: ReasonImageChangedByHand, prefix: driftedPrefix,
		clearedReason: ReasonAsWritten, message: "sidecar images are as the SidecarSets wrote them",
	}
)

// apply sets set's entry (with detail) in conds when raise holds, removes it
// otherwise, and reports whether conds changed and whether set's entry is
// new.
func (k podCondition) apply(conds *[]corev1.PodCondition, set, detail string, raise bool, now metav1.Time) (changed, newly bool) {
	i := slices.IndexFunc(*conds, func(c corev1.PodCondition) bool { return c.Type == k.typ })
	if i < 0 && !raise {
		return false, false
	}
	entries := map[string]string{}
	if i >= 0 {
		entries = k.entries((*conds)[i])
	}
	_, had := entries[set]
	if raise {
		entries[set] = detail
	} else {
		delete(entries, set)
	}
	want := corev1.PodCondition{Type: k.typ, Status: k.cleared, Reason: k.clearedReason, Message: k.message, LastTransitionTime: now}
	if len(entries) > 0 {
		want.Status, want.Reason, want.Message = k.raised, k.raisedReason, k.prefix+formatEntries(entries)
	}
	if i < 0 {
		*conds = append(*conds, want)
		return true, raise && !had
	}
	old := (*conds)[i]
	if old.Status == want.Status {
		want.LastTransitionTime = old.LastTransitionTime
	}
	if old.Status == want.Status && old.Reason == want.Reason && old.Message == want.Message {
		return false, false
	}
	(*conds)[i] = want
	return true, raise && !had
}

// entries reads the verdicts listed in c: set name to detail ("" for none).
func (k podCondition) entries(c corev1.PodCondition) map[string]string {
	out := map[string]string{}
	if c.Status != k.raised {
		return out
	}
	list, ok := strings.CutPrefix(c.Message, k.prefix)
	if !ok {
		// Earlier releases wrote one set's verdict: "SidecarSet <name> …"
		// or "SidecarSet <name>: …".
		if rest, ok := strings.CutPrefix(c.Message, "SidecarSet "); ok {
			if name, _, _ := strings.Cut(rest, " "); strings.TrimSuffix(name, ":") != "" {
				out[strings.TrimSuffix(name, ":")] = ""
			}
		}
		return out
	}
	for entry := range strings.SplitSeq(list, "; ") {
		name, detail, _ := strings.Cut(entry, " (")
		if name != "" {
			out[name] = strings.TrimSuffix(detail, ")")
		}
	}
	return out
}

func formatEntries(entries map[string]string) string {
	var b strings.Builder
	for i, name := range slices.Sorted(maps.Keys(entries)) {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(name)
		if d := entries[name]; d != "" {
			b.WriteString(" (" + d + ")")
		}
	}
	return b.String()
}
