package cli

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Version is this build's version: release builds set it with
// -ldflags "-X github.com/sidecarset/sidecarset/internal/cli.Version=v0.1.0"
// (hack/dist); any other build is "devel".
var Version = "devel"

// ManagerDeployment is the Deployment the chart runs the manager as.
const ManagerDeployment = "sidecarset-manager"

// clientVersion is Version, with the commit a devel build was made from
// when the toolchain recorded it.
func clientVersion() string {
	if Version != "devel" {
		return Version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Version
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return Version
	}
	return Version + "-" + rev + dirty
}

// NewCmdVersion returns `version`.
func NewCmdVersion(o *Options) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version [--client]",
		Short: "Show the versions of kubectl-sidecarset and of the manager in the cluster",
		Long: `Show the version of this kubectl-sidecarset, and of the sidecarset manager the
cluster runs: the image of Deployment sidecarset-manager in --manager-namespace,
with how many of its replicas are ready. --client shows this binary's alone,
without a cluster.

A release build says its version (v0.1.0); any other build says devel, with the
commit it was built from when Go recorded it.`,
		Example: `  kubectl sidecarset version
  kubectl sidecarset version --client`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if clientOnly {
				_, err := fmt.Fprintf(o.Out, "Client: %s\n", clientVersion())
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			return PrintVersion(cmd.Context(), c, o.Out, o.ManagerNamespace)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "show this binary's version only; reads no cluster")
	return exits(cmd, map[int]string{
		0: "the versions are shown",
		1: "the manager's Deployment is not there, or could not be read",
		5: "",
	})
}

// PrintVersion writes the client's version and the manager's, read from
// its Deployment in managerNamespace.
func PrintVersion(ctx context.Context, c client.Reader, out io.Writer, managerNamespace string) error {
	if _, err := fmt.Fprintf(out, "Client: %s\n", clientVersion()); err != nil {
		return err
	}
	var d appsv1.Deployment
	err := c.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: ManagerDeployment}, &d)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("manager: no Deployment %s in namespace %s: it is installed elsewhere (--manager-namespace), "+
			"not installed, or runs outside the cluster (the playground's does)", ManagerDeployment, managerNamespace)
	}
	if err != nil {
		return fmt.Errorf("manager: read Deployment %s/%s: %w", managerNamespace, ManagerDeployment, err)
	}
	var images []string
	for _, ct := range d.Spec.Template.Spec.Containers {
		images = append(images, ct.Image)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	_, err = fmt.Fprintf(out, "Manager: %s (Deployment %s/%s, %d of %d replicas ready)\n",
		strings.Join(images, ", "), managerNamespace, ManagerDeployment, d.Status.ReadyReplicas, want)
	return err
}
