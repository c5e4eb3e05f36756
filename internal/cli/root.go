package cli

import (
	"github.com/spf13/cobra"
)

// NewCmdRoot returns the kubectl-sidecarset command with every verb.
func NewCmdRoot(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kubectl-sidecarset",
		Short: "Inspect and steer SidecarSets: status, rollouts, preflight, offline injection",
		Long: `kubectl-sidecarset inspects and steers SidecarSets (sidecarset.dev/v1alpha1):
their rollout status and pods, the partition of a rollout, whether the webhooks
answer; it also injects and converts manifests offline.

Pointing it at a cluster works as with kubectl: it reads $KUBECONFIG or
~/.kube/config, and takes --kubeconfig, --context, --cluster, --user and
-n/--namespace. Installed on your PATH, it also runs as "kubectl sidecarset".
"inject --sidecarsets FILE" and "convert" need no cluster.

Shell completion ("completion --help") completes verbs, flags and the names
of SidecarSets. For "kubectl sidecarset", kubectl asks a program named
kubectl_complete-sidecarset on the PATH: a link of that name to this binary
is one, for example
  ln -s "$(command -v kubectl-sidecarset)" "$(dirname "$(command -v kubectl-sidecarset)")/kubectl_complete-sidecarset"`,
		Annotations: map[string]string{
			// Help and usage then read "kubectl sidecarset VERB" when run as a
			// kubectl plugin, which is how it is documented.
			cobra.CommandDisplayNameAnnotation: "kubectl sidecarset",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetIn(o.In)
	cmd.SetOut(o.Out)
	cmd.SetErr(o.ErrOut)
	o.ConfigFlags.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&o.ManagerNamespace, "manager-namespace", o.ManagerNamespace,
		"Namespace the sidecarset manager runs in: where revisions are kept, and never injected")
	cmd.AddCommand(
		NewCmdStatus(o),
		NewCmdPods(o),
		NewCmdRollout(o),
		NewCmdPreflight(o),
		NewCmdInject(o),
		NewCmdConvert(o),
		NewCmdRestart(o),
		NewCmdRestartUnmanaged(o),
		NewCmdVersion(o),
	)
	completeNames(cmd, o)
	withUsageErrors(cmd)
	return cmd
}
