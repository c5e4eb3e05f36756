package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// NewCmdHistory returns `rollout history NAME`.
func NewCmdHistory(o *Options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "List a SidecarSet's revisions: their images, which is declared, which completed",
		Long: `List the revisions kept for a SidecarSet (its ControllerRevisions in the
manager's namespace, --manager-namespace), newest first: the number and name
undo --to-revision takes, the sidecar images, how many of its pods run each
one, and its age. STATE says which revision the spec declares now (current)
and which one the last complete rollout reached (completed: what new pods get
while a stalled rollout is paused). spec.revisionHistoryLimit says how many
old ones are kept; one that a pod still runs always is.`,
		Example: `  kubectl sidecarset rollout history mysql-exporter

  # Then go back to one of them
  kubectl sidecarset rollout undo mysql-exporter --to-revision 2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateOutput(output); err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			return History(cmd.Context(), c, o.Out, args[0], o.ManagerNamespace, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: wide, or as kubectl get, of the ControllerRevisions: json, yaml, name, jsonpath=..., go-template=...")
	return exits(cmd, map[int]string{
		0: "the revisions are listed",
		1: "no such SidecarSet, or another error",
		5: "",
	})
}

// History prints the revisions kept for the SidecarSet name, newest first.
func History(ctx context.Context, c client.Client, out io.Writer, name, managerNamespace, output string) error {
	set, err := getSet(ctx, c, name)
	if err != nil {
		return err
	}
	list, err := setRevisions(ctx, c, name, managerNamespace)
	if err != nil {
		return err
	}
	if !isTable(output) {
		return printObject(out, list, output)
	}
	if len(list.Items) == 0 {
		_, err := fmt.Fprintf(out, "%s: no revisions kept in namespace %s (see --manager-namespace)\n", name, managerNamespace)
		return err
	}
	pods, err := setPods(ctx, c, set, "", managerNamespace)
	if err != nil {
		return err
	}
	running := map[string]int{}
	for _, p := range pods {
		running[p.Record.Revision]++
	}
	return printTable(out, historyTable(set, list.Items, running, time.Now()), output == OutputWide)
}

// setRevisions lists the ControllerRevisions of the SidecarSet name in
// managerNamespace, newest first.
func setRevisions(ctx context.Context, c client.Client, name, managerNamespace string) (*appsv1.ControllerRevisionList, error) {
	var list appsv1.ControllerRevisionList
	if err := c.List(ctx, &list, client.InNamespace(managerNamespace),
		client.MatchingLabels{v1alpha1.LabelSidecarSet: name}); err != nil {
		return nil, fmt.Errorf("list revisions of %s in %s: %w", name, managerNamespace, err)
	}
	slices.SortFunc(list.Items, func(a, b appsv1.ControllerRevision) int { return int(b.Revision - a.Revision) })
	return &list, nil
}

// historyTable is the table of revs (newest first) of set; running counts
// the set's pods per revision.
func historyTable(set *v1alpha1.SidecarSet, revs []appsv1.ControllerRevision, running map[string]int, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("REVISION", "The ControllerRevision's number: the order in which the revisions were declared.", false),
		column("NAME", "The ControllerRevision's name, as status and pods show revisions.", false),
		column("IMAGES", "The revision's sidecar images, NAME=IMAGE.", false),
		column("PODS", "The SidecarSet's pods on the revision.", false),
		column("STATE", "current: the spec declares it; completed: the last complete rollout reached it.", false),
		column("AGE", "Since the revision was first declared.", false),
	}}
	current := revision.Name(set.Name, &set.Spec)
	for _, r := range revs {
		imgs := "<unreadable>"
		var spec v1alpha1.SidecarSetSpec
		if revision.ApplyData(&spec, r.Data.Raw) == nil {
			imgs = images(&spec)
		}
		var state []string
		if r.Name == current {
			state = append(state, "current")
		}
		if r.Name == set.Status.CompletedRevision {
			state = append(state, "completed")
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			strconv.FormatInt(r.Revision, 10), r.Name, imgs, strconv.Itoa(running[r.Name]),
			orNone(strings.Join(state, ",")), age(r.CreationTimestamp, now),
		}})
	}
	return t
}
