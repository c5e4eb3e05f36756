package validation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func labels(kv ...string) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		sel.MatchLabels[kv[i]] = kv[i+1]
	}
	return sel
}

func expr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func TestSelectorsCanOverlap(t *testing.T) {
	cases := []struct {
		name string
		a, b *metav1.LabelSelector
		want bool
	}{
		{"nil matches everything", nil, labels("app", "db"), true},
		{"both nil", nil, nil, true},
		{"empty matches everything", &metav1.LabelSelector{}, labels("app", "db"), true},
		{"same matchLabels", labels("app", "db"), labels("app", "db"), true},
		{"different keys can both be on one pod", labels("app", "db"), labels("tier", "backend"), true},
		{"matchLabels values differ", labels("app", "db"), labels("app", "web"), false},
		{"one differing key is enough", labels("app", "db", "tier", "x"), labels("app", "db", "tier", "y"), false},
		{"In sets intersect", expr("app", metav1.LabelSelectorOpIn, "db", "cache"), expr("app", metav1.LabelSelectorOpIn, "cache", "web"), true},
		{"In sets disjoint", expr("app", metav1.LabelSelectorOpIn, "db", "cache"), expr("app", metav1.LabelSelectorOpIn, "web"), false},
		{"matchLabels value in the In set", labels("app", "db"), expr("app", metav1.LabelSelectorOpIn, "db", "web"), true},
		{"matchLabels value outside the In set", labels("app", "db"), expr("app", metav1.LabelSelectorOpIn, "web"), false},
		{"required against DoesNotExist", labels("app", "db"), expr("app", metav1.LabelSelectorOpDoesNotExist), false},
		{"Exists against DoesNotExist", expr("app", metav1.LabelSelectorOpExists), expr("app", metav1.LabelSelectorOpDoesNotExist), false},
		{"Exists against matchLabels", expr("app", metav1.LabelSelectorOpExists), labels("app", "db"), true},
		{"NotIn the required value", labels("app", "db"), expr("app", metav1.LabelSelectorOpNotIn, "db"), false},
		{"NotIn another value", labels("app", "db"), expr("app", metav1.LabelSelectorOpNotIn, "web"), true},
		{"NotIn excludes the whole In set", expr("app", metav1.LabelSelectorOpIn, "db", "web"), expr("app", metav1.LabelSelectorOpNotIn, "web", "db"), false},
		{"NotIn leaves part of the In set", expr("app", metav1.LabelSelectorOpIn, "db", "web"), expr("app", metav1.LabelSelectorOpNotIn, "web"), true},
		{"NotIn is satisfied by a missing label", expr("app", metav1.LabelSelectorOpNotIn, "db"), expr("app", metav1.LabelSelectorOpDoesNotExist), true},
		{"Exists and NotIn leave other values", expr("app", metav1.LabelSelectorOpExists), expr("app", metav1.LabelSelectorOpNotIn, "db"), true},
		{"unknown operator is ignored, so may overlap", expr("app", "Like", "db"), labels("app", "web"), true},
		{"In without values is ignored, so may overlap", expr("app", metav1.LabelSelectorOpIn), labels("app", "web"), true},
		{
			"a selector that contradicts itself overlaps nothing",
			&metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist}}},
			nil,
			false,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := selectorsCanOverlap(tc.a, tc.b); got != tc.want {
				t.Errorf("selectorsCanOverlap(a, b) = %v, want %v", got, tc.want)
			}
			if got := selectorsCanOverlap(tc.b, tc.a); got != tc.want {
				t.Errorf("selectorsCanOverlap(b, a) = %v, want %v", got, tc.want)
			}
		})
	}
}
