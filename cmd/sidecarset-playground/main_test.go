package main

import (
	"errors"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sidecarset/sidecarset/internal/playground"
)

func TestParseFlags(t *testing.T) {
	const root, user = 0, 1000
	for _, tc := range []struct {
		name string
		args []string
		euid int
		// want holds the options' node kind, node count and exit-after-demo
		// when parsing succeeds.
		want playground.Options
		// demo is --demo, when not the default (true) or false.
		demo    demoMode
		wantErr string
	}{
		{name: "defaults", euid: user,
			want: playground.Options{NodeKind: playground.Simulated, Nodes: 3, Demo: true}},
		{name: "simulated nodes", args: []string{"--nodes", "5", "--demo=false"}, euid: user,
			want: playground.Options{NodeKind: playground.Simulated, Nodes: 5}},
		{name: "real node as root", args: []string{"--node-kind=real", "--exit-after-demo"}, euid: root,
			want: playground.Options{NodeKind: playground.Real, Nodes: 1, Demo: true, ExitAfterDemo: true}},
		{name: "real node, --nodes 1", args: []string{"--node-kind", "real", "--nodes", "1"}, euid: root,
			want: playground.Options{NodeKind: playground.Real, Nodes: 1, Demo: true}},
		{name: "real node without root", args: []string{"--node-kind=real"}, euid: user,
			wantErr: "--node-kind=real runs a real kubelet, containerd and runc, which need root"},
		{name: "real node, several", args: []string{"--node-kind=real", "--nodes", "3"}, euid: root,
			wantErr: "--nodes 3: --node-kind=real runs one node"},
		{name: "unknown kind", args: []string{"--node-kind=virtual"}, euid: root,
			wantErr: "--node-kind=virtual: want simulated or real"},
		{name: "no nodes", args: []string{"--nodes", "0"}, euid: user,
			wantErr: "--nodes 0: must be at least 1"},
		{name: "exit after no demo", args: []string{"--demo=false", "--exit-after-demo"}, euid: user,
			wantErr: "--exit-after-demo needs the demo"},
		{name: "simulated nodes that take time", args: []string{"--sim-delay", "2s"}, euid: user,
			want: playground.Options{NodeKind: playground.Simulated, Nodes: 3, Demo: true, SimDelay: 2 * time.Second}},
		{name: "a delay on a real node", args: []string{"--node-kind=real", "--sim-delay", "2s"}, euid: root,
			wantErr: "--sim-delay 2s: a real node takes the time it takes"},
		{name: "a negative delay", args: []string{"--sim-delay", "-1s"}, euid: user,
			wantErr: "--sim-delay -1s: must be between 0 and 10s"},
		{name: "argument", args: []string{"real"}, euid: root,
			wantErr: `unexpected argument "real"`},
		{name: "a demo run through", args: []string{"--demo=auto"}, euid: user,
			want: playground.Options{NodeKind: playground.Simulated, Nodes: 3, Demo: true}, demo: demoAuto},
		{name: "a guided demo", args: []string{"--demo=guided"}, euid: user,
			want: playground.Options{NodeKind: playground.Simulated, Nodes: 3, Demo: true}, demo: demoGuided},
		{name: "--demo alone", args: []string{"--demo"}, euid: user,
			want: playground.Options{NodeKind: playground.Simulated, Nodes: 3, Demo: true}, demo: demoOn},
		{name: "an unknown demo", args: []string{"--demo=maybe"}, euid: user,
			wantErr: `"maybe" for -demo: want true, guided, auto or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, f, err := parseFlags(tc.args, tc.euid, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := playground.Options{NodeKind: opts.NodeKind, Nodes: opts.Nodes, Demo: opts.Demo, ExitAfterDemo: opts.ExitAfterDemo, SimDelay: opts.SimDelay}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			want := tc.demo
			switch {
			case want != "":
			case tc.want.Demo:
				want = demoOn
			default:
				want = demoOff
			}
			if f.demo != want {
				t.Errorf("--demo %q, want %q", f.demo, want)
			}
			if !filepath.IsAbs(opts.KubeConfig) || filepath.Base(opts.KubeConfig) != "playground.kubeconfig" {
				t.Errorf("kubeconfig %q, want ./playground.kubeconfig made absolute", opts.KubeConfig)
			}
		})
	}
	if _, _, err := parseFlags([]string{"--help"}, user, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v, want flag.ErrHelp", err)
	}
}
