package realnode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// proxyConfig runs kube-proxy in iptables mode for the pods' range, with
// its health and metrics endpoints on loopback, NodePorts on the node's
// bridge address only (never on loopback, which would need
// route_localnet), and every machine-wide setting it would otherwise change
// left as it is: conntrack table size and timeouts, and its own
// oom_score_adj (root here may not lower it).
func proxyConfig(kubeconfig string, healthzPort, metricsPort int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %q
hostnameOverride: %s
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
clusterCIDR: %s
detectLocalMode: ClusterCIDR
nodePortAddresses: [%s/32]
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
oomScoreAdj: 0
`, kubeconfig, NodeName, healthzPort, metricsPort, podSubnet, bridgeIP)
}

// checkNoProxyRules refuses to start beside another kube-proxy, or over
// rules one left behind: teardown removes every chain of an iptables-mode
// kube-proxy, and they would be taken for this node's. An nftables-mode
// kube-proxy writes its rules with the nft command (knftables runs it):
// where nft is installed, its tables ip and ip6 kube-proxy must be absent
// too; where it is not, no such kube-proxy has run.
func checkNoProxyRules(ctx context.Context) error {
	for _, f := range ipFamilies {
		save, err := f.save(ctx)
		if err != nil {
			return err
		}
		if chains := proxyChains(save, false); len(chains) > 0 {
			return fmt.Errorf("%s: kube-proxy's chains exist (%s): a kube-proxy runs on this machine, or one left its rules behind", f.saveCmd, strings.Join(chains, ", "))
		}
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return nil //nolint:nilerr // no nft: no nftables-mode kube-proxy has run
	}
	out, err := exec.CommandContext(ctx, "nft", "list", "tables").Output()
	if err != nil {
		return fmt.Errorf("list nftables tables: nft list tables: %w", err)
	}
	if tables := nftProxyTables(string(out)); len(tables) > 0 {
		return fmt.Errorf("nftables tables %s exist: an nftables-mode kube-proxy runs on this machine, or one left its tables behind", strings.Join(tables, ", "))
	}
	return nil
}

// nftProxyTables picks the tables of an nftables-mode kube-proxy from the
// output of `nft list tables` ("table ip kube-proxy").
func nftProxyTables(list string) []string {
	var tables []string
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && (f[1] == "ip" || f[1] == "ip6") && f[2] == "kube-proxy" {
			tables = append(tables, f[1]+" "+f[2])
		}
	}
	return tables
}

// waitProxy waits until kube-proxy's health endpoint says it has written
// its rules.
func (n *Node) waitProxy(ctx context.Context, healthzPort int) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", healthzPort)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if n.proxy.hasExited() {
			return false, fmt.Errorf("kube-proxy exited: %w", cmp.Or(n.proxy.err, errExitedCleanly))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not yet: the poll tries again
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("wait for kube-proxy to write its rules: %w", err)
	}
	return nil
}

// ipFamily names the iptables commands of one IP family; an
// iptables-mode kube-proxy writes rules for both.
type ipFamily struct {
	name, saveCmd, restoreCmd string
}

var ipFamilies = []ipFamily{
	{name: "ipv4", saveCmd: "iptables-save", restoreCmd: "iptables-restore"},
	{name: "ipv6", saveCmd: "ip6tables-save", restoreCmd: "ip6tables-restore"},
}

func (f ipFamily) save(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, f.saveCmd).Output()
	if err != nil {
		return "", fmt.Errorf("list %s rules: %s: %w", f.name, f.saveCmd, err)
	}
	return string(out), nil
}

// withoutFirewall lists the IP families whose filter table has no chain
// KUBE-FIREWALL: kube-proxy creates it where it is missing (a copy of the
// kubelet's), so there it is the node's to remove.
func withoutFirewall(ctx context.Context) ([]string, error) {
	var families []string
	for _, f := range ipFamilies {
		save, err := f.save(ctx)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(tableChains(save)["filter"], kubeletFirewall) {
			families = append(families, f.name)
		}
	}
	return families, nil
}

// cleanUpProxy removes what an iptables-mode kube-proxy created, once the
// process is gone: its chains, in both IP families, the rules jumping to
// them, and KUBE-FIREWALL in the families firewall names. Nothing else is
// touched: `kube-proxy --cleanup` would also clear every IPVS and nftables
// kube-proxy's state on the machine.
func cleanUpProxy(firewall []string) error {
	ctx := context.Background()
	var errs []error
	for _, f := range ipFamilies {
		save, err := f.save(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		restore := proxyCleanup(save, slices.Contains(firewall, f.name))
		if restore == "" {
			continue
		}
		cmd := exec.CommandContext(ctx, f.restoreCmd, "-w", "--noflush")
		cmd.Stdin = strings.NewReader(restore)
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("remove kube-proxy's %s rules: %s --noflush: %w: %s", f.name, f.restoreCmd, err, strings.TrimSpace(string(out))))
		}
	}
	return errors.Join(errs...)
}

// kubeletFirewall is the chain the kubelet, and kube-proxy after it,
// makes sure of in the filter table.
const kubeletFirewall = "KUBE-FIREWALL"

// proxyChainNames and proxyChainPrefixes name the chains an iptables-mode
// kube-proxy creates (pkg/proxy/iptables): its fixed chains, and one chain
// per Service, Service port and endpoint.
var (
	proxyChainNames = []string{
		"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING",
		"KUBE-MARK-MASQ", "KUBE-FORWARD", "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY",
	}
	proxyChainPrefixes = []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-SEP-", "KUBE-EXT-", "KUBE-FW-"}
)

// proxyOwns says whether kube-proxy created chain; KUBE-FIREWALL only
// with firewall.
func proxyOwns(chain string, firewall bool) bool {
	if chain == kubeletFirewall {
		return firewall
	}
	if slices.Contains(proxyChainNames, chain) {
		return true
	}
	return slices.ContainsFunc(proxyChainPrefixes, func(p string) bool { return strings.HasPrefix(chain, p) })
}

// proxyChains lists kube-proxy's chains in iptables-save output, as
// table/chain.
func proxyChains(save string, firewall bool) []string {
	var found []string
	for table, chains := range tableChains(save) {
		for _, c := range chains {
			if proxyOwns(c, firewall) {
				found = append(found, table+"/"+c)
			}
		}
	}
	slices.Sort(found)
	return found
}

// tableChains lists the chains of each table in iptables-save output.
func tableChains(save string) map[string][]string {
	chains := map[string][]string{}
	table := ""
	for _, line := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			if f := strings.Fields(line[1:]); len(f) > 0 {
				chains[table] = append(chains[table], f[0])
			}
		}
	}
	return chains
}

// proxyCleanup turns iptables-save output into iptables-restore --noflush
// input that removes kube-proxy's chains (with firewall, KUBE-FIREWALL
// too): in each table holding any, it empties them, deletes the rules in
// other chains that jump to them, and deletes the chains. It is empty when
// there is nothing to remove.
func proxyCleanup(save string, firewall bool) string {
	type table struct {
		name              string
		flush, del, rules []string
	}
	var tables []*table
	var cur *table
	for _, line := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			cur = &table{name: line[1:]}
			tables = append(tables, cur)
		case cur == nil:
		case strings.HasPrefix(line, ":"):
			if f := strings.Fields(line[1:]); len(f) > 0 && proxyOwns(f[0], firewall) {
				cur.flush = append(cur.flush, ":"+f[0]+" - [0:0]")
				cur.del = append(cur.del, "-X "+f[0])
			}
		case strings.HasPrefix(line, "-A "):
			f := ruleFields(line)
			if len(f) > 1 && !proxyOwns(f[1], firewall) && proxyOwns(ruleTarget(f), firewall) {
				cur.rules = append(cur.rules, "-D"+strings.TrimPrefix(line, "-A"))
			}
		}
	}
	var b strings.Builder
	for _, t := range tables {
		if len(t.flush) == 0 && len(t.rules) == 0 {
			continue
		}
		b.WriteString("*" + t.name + "\n")
		for _, l := range slices.Concat(t.flush, t.rules, t.del) {
			b.WriteString(l + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// ruleFields splits a rule line of iptables-save into its words; a
// double-quoted word (a comment) is one, with its quotes.
func ruleFields(line string) []string {
	var fields []string
	var word strings.Builder
	quoted, escaped, inWord := false, false, false
	for _, r := range line {
		switch {
		case escaped:
			escaped = false
		case r == '\\':
			escaped = true
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if inWord {
				fields = append(fields, word.String())
				word.Reset()
				inWord = false
			}
			continue
		}
		word.WriteRune(r)
		inWord = true
	}
	if inWord {
		fields = append(fields, word.String())
	}
	return fields
}

// ruleTarget is the chain a rule jumps or goes to (-j, -g), or "".
func ruleTarget(fields []string) string {
	for i := len(fields) - 2; i >= 0; i-- {
		if fields[i] == "-j" || fields[i] == "-g" || fields[i] == "--jump" || fields[i] == "--goto" {
			return fields[i+1]
		}
	}
	return ""
}
