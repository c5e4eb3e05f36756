#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager and kubectl from source, once per
# version, into a cache outside the work tree, and prints that folder. Tests and
# the playground point KUBEBUILDER_ASSETS at it. A later run finds the binaries
# and returns at once.
#
# `hack/control-plane.sh kubelet` builds the kubelet, kube-scheduler and
# kube-proxy into the same folder too, for the end-to-end tests on a real node
# (`make e2e`: a Deployment's pods need the scheduler, and pods reach Services
# through kube-proxy's rules); `make test` does not need them and does not
# wait for them.
set -euo pipefail

with_kubelet=false
case "${1:-}" in
'') ;;
kubelet) with_kubelet=true ;;
*)
	echo "usage: $0 [kubelet]" >&2
	exit 2
	;;
esac

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.0

root=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${SIDECARSET_TOOLS_CACHE:-$(dirname "$(go env GOCACHE)")/sidecarset-tools}
dir="$cache_root/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$dir"

log() { printf '[control-plane] %s\n' "$*" >&2; }

# every30 WHAT: says "still WHAT (N s so far)" every 30 s until killed. Run
# it in the background, without the lock's descriptor and with stdout on
# stderr, so that neither it nor its sleep, which outlives a kill by up to
# 30 s, holds the lock or the stdout that `$(shell hack/control-plane.sh)`
# reads to its end.
every30() {
	local start=$SECONDS
	while sleep 30; do log "  still $1 ($((SECONDS - start)) s so far)"; done
}

# build NAME MODULE_DIR PACKAGE LDFLAGS: builds one binary unless it is cached,
# printing a line every 30 s so a long first build never looks stuck. One
# build of a binary at a time: a second caller waits for the first's, and
# says so every 30 s too.
build() {
	local name=$1 moddir=$2 pkg=$3 ldflags=$4
	if [ -x "$dir/$name" ]; then
		return
	fi
	local lock ticker
	exec {lock}>"$dir/$name.lock"
	if ! flock -n "$lock"; then
		log "another build of $name is running; waiting for it"
		every30 "waiting for the other build of $name" {lock}>&- >&2 &
		ticker=$!
		flock "$lock"
		kill "$ticker" 2>/dev/null || true
		wait "$ticker" 2>/dev/null || true
	fi
	if [ -x "$dir/$name" ]; then
		exec {lock}>&-
		return
	fi
	log "building $name from source (first run only; kube-apiserver and the kubelet take about 5 minutes each on 2 cores)"
	local start=$SECONDS
	every30 "building $name" {lock}>&- >&2 &
	ticker=$!
	local rc=0
	(cd "$root/hack/tools/$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/$name.tmp" "$pkg") || rc=$?
	kill "$ticker" 2>/dev/null || true
	wait "$ticker" 2>/dev/null || true
	if [ "$rc" -ne 0 ]; then
		log "building $name failed (exit $rc)"
		exit "$rc"
	fi
	mv "$dir/$name.tmp" "$dir/$name"
	exec {lock}>&-
	log "built $name in $((SECONDS - start)) s"
}

minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
version_flags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"

build etcd etcd . "-s -w"
build kube-apiserver k8s ./kube-apiserver "$version_flags"
build kube-controller-manager k8s ./kube-controller-manager "$version_flags"
build kubectl k8s ./kubectl "$version_flags"
if $with_kubelet; then
	build kubelet k8s ./kubelet "$version_flags"
	build kube-scheduler k8s ./kube-scheduler "$version_flags"
	build kube-proxy k8s ./kube-proxy "$version_flags"
fi

echo "$dir"
