#!/usr/bin/env bash
# Fails when generated code or CRDs differ from what the generators produce now.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
generated=(api config charts/sidecarset/crds charts/sidecarset/files)
for d in "${generated[@]}"; do
	mkdir -p "$tmp/$(dirname "$d")"
	cp -r "$d" "$tmp/$d"
done
make --no-print-directory generate manifests >/dev/null
status=0
for d in "${generated[@]}"; do
	if ! diff -r "$tmp/$d" "$d" >"$tmp/diff" 2>&1; then
		echo "generated files under $d/ are out of date; run 'make generate manifests' and commit:" >&2
		head -40 "$tmp/diff" >&2
		status=1
	fi
done
exit $status
