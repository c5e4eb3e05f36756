#!/usr/bin/env bash
# Fails when generated code or manifests differ from what the generators
# produce now (`make generate manifests`), when a file in a generated folder
# is one no generator writes any more, or when a generated file is not
# tracked by git (a commit would leave it behind).
#
# It compares the work tree before and after regenerating, so it can run
# before the change is committed; on a clean clone that is `git diff`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Folders whose files all come from the generators, and single generated
# files elsewhere. Generating again rewrites them in place.
generated_dirs=(config/crd charts/sidecarset/crds docs/reference/cli)
generated_files=(docs/reference/api.md config/install/install.yaml config/rbac/role.yaml config/rbac/policy/role.yaml charts/sidecarset/files/role.yaml charts/sidecarset/files/policy-role.yaml charts/sidecarset/files/restrict-sidecars.yaml)
mapfile -t deepcopy < <(find api -name 'zz_generated.*.go')
generated_files+=("${deepcopy[@]}")

tmp=$(mktemp -d)
restore=true
cleanup() {
	# A generator that failed halfway leaves the tree as it was.
	if $restore; then
		for d in "${generated_dirs[@]}"; do
			rm -rf "$d"
			cp -r "$tmp/before/$d" "$d"
		done
		for f in "${generated_files[@]}"; do
			cp "$tmp/before/$f" "$f"
		done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

for p in "${generated_dirs[@]}" "${generated_files[@]}"; do
	mkdir -p "$tmp/before/$(dirname "$p")"
	cp -r "$p" "$tmp/before/$p"
done
# Emptied first, so that what no generator writes any more stays missing.
for d in "${generated_dirs[@]}"; do
	rm -f "$d"/*
done
rm -f "${deepcopy[@]}"
make --no-print-directory generate manifests >/dev/null

status=0
for p in "${generated_dirs[@]}" "${generated_files[@]}"; do
	if [ ! -e "$p" ]; then
		echo "$p is no longer generated; delete it (git rm) and commit" >&2
		status=1
	elif ! diff -r "$tmp/before/$p" "$p" >"$tmp/diff" 2>&1; then
		echo "$p is out of date; run 'make generate manifests' and commit the result:" >&2
		sed -e 's/^/    /' "$tmp/diff" | head -40 >&2
		status=1
	fi
done
if [ "$status" -ne 0 ]; then
	exit "$status"
fi
restore=false

# Generated files that exist now, tracked or not, each must be in git; a
# new API package's deepcopy file shows up only after generating.
mapfile -t deepcopy < <(find api -name 'zz_generated.*.go')
mapfile -t untracked < <(git ls-files --others --exclude-standard -- "${generated_dirs[@]}" "${generated_files[@]}" "${deepcopy[@]}")
if [ "${#untracked[@]}" -gt 0 ]; then
	echo "generated files not tracked by git; add and commit them:" >&2
	printf '    %s\n' "${untracked[@]}" >&2
	exit 1
fi
