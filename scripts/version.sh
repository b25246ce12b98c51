#!/bin/sh
# Prints the version a build of electd stamps (make, scripts/package.sh), from
# the release tags vMAJOR.MINOR.PATCH (optionally -PRERELEASE), as a
# semantic version without the v:
#
#   at the tag v0.9.0                      0.9.0
#   4 commits past it                      0.9.0+4.gabc1234def0
#   no release tag reachable (or no git)   0.0.0-dev+abc1234def0 (0.0.0-dev+unknown)
#   uncommitted changes                    .dirty appended to the build part (0.9.0+dirty)
#
# A build past a tag sorts after it (build metadata), an untagged one before
# any release (a prerelease of 0.0.0). Run from anywhere in the checkout.
set -eu

cd "$(dirname "$0")/.."
commit=$(git rev-parse --short=12 HEAD 2>/dev/null) || {
	echo 0.0.0-dev+unknown
	exit 0
}
dirty=
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	dirty=dirty
fi
# --abbrev=12 as the commit above; --match keeps other tags out.
desc=$(git describe --tags --abbrev=12 --match 'v[0-9]*.[0-9]*.[0-9]*' 2>/dev/null) || desc=

# v1.2.3, v1.2.3-rc.1, each optionally followed by -N-gHASH.
release=$(printf '%s\n' "$desc" | sed -n -E 's/^v([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?)(-[0-9]+-g[0-9a-f]+)?$/\1/p')
if [ -z "$release" ]; then
	echo "0.0.0-dev+$commit${dirty:+.$dirty}"
	exit 0
fi
past=$(printf '%s\n' "$desc" | sed -n -E 's/^.*-([0-9]+)-g([0-9a-f]+)$/\1.g\2/p')
build=$past
[ -z "$dirty" ] || build=${build:+$build.}$dirty
echo "$release${build:++$build}"
