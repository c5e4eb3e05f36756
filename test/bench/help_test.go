package bench

import "testing"

func TestHelpOffersPolicy(t *testing.T) {
	tests := []struct {
		name string
		help string
		want bool
	}{
		{
			name: "the flag takes policy",
			help: "Flags:\n  -health-probe-bind-address string\n    \taddress of /healthz\n  -injection string\n    \thow pods get their sidecars: policy, webhook or auto (default \"auto\")\n  -kubeconfig string\n",
			want: true,
		},
		{
			name: "policy named on a later line of the description",
			help: "Flags:\n  -injection string\n    \thow pods get their sidecars:\n    \tpolicy or webhook\n  -namespace string\n",
			want: true,
		},
		{
			name: "no such flag",
			help: "Flags:\n  -kubeconfig string\n    \tpaths to a kubeconfig\n  -namespace string\n    \tthe manager's own namespace\n",
			want: false,
		},
		{
			name: "policy named by another flag only",
			help: "Flags:\n  -injection string\n    \twebhook only\n  -webhook-failure-policy string\n    \tthe failure policy\n",
			want: false,
		},
		{
			name: "a flag whose name starts the same",
			help: "Flags:\n  -injection-timeout duration\n    \thow long a policy may take\n",
			want: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := helpOffersPolicy(tt.help); got != tt.want {
				t.Errorf("helpOffersPolicy() = %v, want %v", got, tt.want)
			}
		})
	}
}
