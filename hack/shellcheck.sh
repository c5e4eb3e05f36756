#!/usr/bin/env bash
# Lints the shell scripts under hack/ and .ci/ with shellcheck: every file
# there git knows or would add that is named *.sh or starts with a shell's
# #! line. When the linter is missing, installs the Debian package first
# (as root), as the end-to-end tests install theirs.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v shellcheck >/dev/null; then
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
		echo "shellcheck is missing: install it (Debian: apt-get install shellcheck), or run as root on Debian to have it installed" >&2
		exit 1
	fi
	echo "[shellcheck] installing the Debian package shellcheck" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends shellcheck >&2
fi

scripts=()
while IFS= read -r f; do
	if [[ $f == *.sh ]] || head -n1 "$f" | grep -Eq '^#!.*(/|env )(ba|da|k|)sh\b'; then
		scripts+=("$f")
	fi
done < <(git ls-files --cached --others --exclude-standard hack .ci)
shellcheck "${scripts[@]}"
