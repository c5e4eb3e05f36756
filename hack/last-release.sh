#!/usr/bin/env bash
# Builds the sidecarset-manager of the last release, the commit
# test/integration/lastrelease_test.go names (lastRelease), once, into a
# cache outside the work tree, and prints the binary's path. The tests that
# run it beside this release's manager (TestLastReleaseBeside,
# TestUpgradeFromLastReleaseMidRollout) read that path from
# SIDECARSET_LAST_RELEASE_MANAGER. The source comes from this clone's
# history: a clone without that commit (a shallow one) gets a warning on
# stderr and an empty path, and the tests skip, saying why.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
commit=$(sed -n 's/^const lastRelease = "\([0-9a-f]*\)"$/\1/p' "$root/test/integration/lastrelease_test.go")
if [[ -z $commit ]]; then
	echo "last-release: no lastRelease commit in test/integration/lastrelease_test.go" >&2
	exit 1
fi
cache_root=${SIDECARSET_TOOLS_CACHE:-$(dirname "$(go env GOCACHE)")/sidecarset-tools}
bin="$cache_root/last-release-$commit/sidecarset-manager"
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi
if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
	echo "last-release: commit $commit is not in this clone's history (a shallow clone?): the tests of the last release's manager skip" >&2
	exit 0
fi
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git -C "$root" archive "$commit" | tar -x -C "$src"
mkdir -p "$(dirname "$bin")"
(cd "$src" && go build -o "$bin.tmp" ./cmd/sidecarset-manager)
mv "$bin.tmp" "$bin"
echo "$bin"
