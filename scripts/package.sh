#!/usr/bin/env bash
# Builds electd's Debian package (electd_<version>_<arch>.deb), its RPM
# (electd-<version>-1.<arch>.rpm), or both from one build, from the one
# description dist/nfpm.yaml,
# with goreleaser's nfpm (tools/nfpm, a module of its own: its dependencies
# stay out of electd's). `make deb` and `make rpm` run it. `make install
# PREFIX=/usr` lays the files out under a staging root, so that the packages
# and a source install cannot differ; this adds what a package needs
# besides: for the .deb the copyright file (with the licenses of the Go
# modules compiled in) and the changelog; nfpm writes the control file,
# conffiles and md5sums, and adds the maintainer scripts of dist/debian or
# dist/rpm. `make packages` builds both.
#
#   scripts/package.sh [-o DIR] deb|rpm...  the packages go to DIR (default bin); their paths are printed
#
# Needs Go and a C compiler (dpkg-shlibdeps and strip are used when present).
# VERSION overrides scripts/version.sh's version, PKG_MAINTAINER the
# maintainer (default: the author of the last commit), GOARCH the
# architecture (Go cross-compiles). SOURCE_DATE_EPOCH (default: the last
# commit's time) dates the changelog, the man page and the files.
set -euo pipefail

cd "$(dirname "$0")/.."
out=bin
while getopts o: opt; do
	case $opt in
	o) out=$OPTARG ;;
	*)
		echo "usage: scripts/package.sh [-o DIR] deb|rpm..." >&2
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- ""
for packager in "$@"; do
	case $packager in
	deb | rpm) ;;
	*)
		echo "usage: scripts/package.sh [-o DIR] deb|rpm..." >&2
		exit 2
		;;
	esac
done

die() {
	printf 'package: %s\n' "$*" >&2
	exit 1
}
version=${VERSION:-$(scripts/version.sh)}
commit=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
maintainer=${PKG_MAINTAINER:-${DEB_MAINTAINER:-$(git log -1 --format='%an <%ae>' 2>/dev/null || true)}}
[ -n "$maintainer" ] || die "no maintainer: set PKG_MAINTAINER='Name <address>'"

# nfpm names the architecture as Go does, and maps it for dpkg and rpm.
goarch=$(go env GOARCH)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"

# Linked with the C library (cgo: Debian's rule for executables, which
# lintian holds a static one to), position-independent, stripped, with no
# build paths in it. Another GOARCH needs its cross compiler in CC.
export CGO_ENABLED=${CGO_ENABLED:-1}
if ! make --no-print-directory install DESTDIR="$root" PREFIX=/usr BIN="$work/electd" \
	VERSION="$version" COMMIT="$commit" BUILDFLAGS="-trimpath -buildmode=pie" \
	LDFLAGS="-s -w -X main.version=$version -X main.commit=$commit -linkmode=external -extldflags '-Wl,-z,relro,-z,now'" >"$work/make.log" 2>&1; then
	cat "$work/make.log" >&2
	die "make install failed"
fi

# What dh_strip removes besides: the linker's .comment.
for b in "$root/usr/bin/electd" "$root/usr/lib/electd/electd-shim"; do
	strip --remove-section=.comment --remove-section=.note "$b" 2>/dev/null || true
done

# Depends: the libraries the binary links, as dpkg-shlibdeps (dpkg-dev)
# finds them, else the newest glibc symbol version it needs.
depends=adduser
if command -v dpkg-shlibdeps >/dev/null; then
	mkdir -p "$work/debian"
	printf 'Source: electd\n\nPackage: electd\nArchitecture: any\n' >"$work/debian/control"
	libs=$(cd "$work" && dpkg-shlibdeps -O -e root/usr/bin/electd -e root/usr/lib/electd/electd-shim 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
elif glibc=$(readelf --dyn-syms -W "$root/usr/bin/electd" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1) && [ -n "$glibc" ]; then
	libs="libc6 (>= $glibc)"
else
	libs=
fi
[ -z "$libs" ] || depends="$libs, $depends"

# The Debian package's own files, beside the staging root.
debian=$work/debian
mkdir -p "$debian"

# changelog.Debian: one entry, for this build, with the version nfpm gives
# the package (a prerelease sorts before its release with ~).
deb_version=${version/-/\~}-1
cat >"$work/changelog.Debian" <<EOF
electd ($deb_version) unstable; urgency=medium

  * Built from commit $commit.

 -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
EOF
gzip -9n <"$work/changelog.Debian" >"$debian/changelog.Debian.gz"

# The upstream changelog, where Debian looks for it (lintian's
# wrong-name-for-upstream-changelog); the RPM keeps CHANGELOG.md (the .deb
# is built without it, below).
gzip -9n <CHANGELOG.md >"$debian/changelog.gz"

# copyright: electd's own license, then every Go module compiled into the
# binary with its license, read from the module cache the build used.
{
	cat <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: electd
Comment: /usr/bin/electd is a Go program: the Go standard library and the Go
 modules named in the Files fields below are compiled into it (only the C
 library is linked dynamically), each under its own license.

EOF
	# electd is under the Apache License 2.0 (LICENSE); Debian points to its
	# own copy of the text rather than repeating it.
	grep -q 'Apache License' LICENSE && grep -q 'Version 2.0, January 2004' LICENSE ||
		die "LICENSE is not the Apache License 2.0 text"
	printf 'Files: *\nCopyright: the electd authors\nLicense: Apache-2.0\n'
	printf ' Licensed under the Apache License, Version 2.0 (see LICENSE in the\n'
	printf ' sources).\n .\n On Debian systems the Apache License 2.0 is in\n'
	printf ' /usr/share/common-licenses/Apache-2.0.\n'
	printf '\nFiles: go/*\nCopyright: The Go Authors\nLicense: Go\n'
	sed -e 's/[[:space:]]*$//' -e 's/^$/./' -e 's/^/ /' "$(go env GOROOT)/LICENSE"
	modcache=$(go env GOMODCACHE)
	go version -m "$root/usr/bin/electd" | awk '$1 == "dep" || $1 == "=>" { print $2, $3 }' |
		while read -r path ver; do
			# The module cache escapes capitals: Azure -> !azure.
			dir=$modcache/$(sed 's/[A-Z]/!\L&/g' <<<"$path")@$(sed 's/[A-Z]/!\L&/g' <<<"$ver")
			lic=
			for f in LICENSE LICENSE.txt LICENSE.md LICENCE COPYING LICENSE-MIT; do
				if [ -f "$dir/$f" ]; then
					lic=$dir/$f
					break
				fi
			done
			[ -n "$lic" ] || die "no license file for the Go module $path $ver in $dir"
			holders=$(grep -m 3 -i -E '^[[:space:]]*copyright[[:space:]]*(\(c\)|©|[0-9])' "$lic" |
				sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e '2,$s/^/ /' || true)
			printf '\nFiles: %s/*\nCopyright: %s\n' "$path" "${holders:-the authors of $path}"
			if grep -q 'Apache License' "$lic" && grep -q 'Version 2.0' "$lic"; then
				printf 'License: Apache-2.0\n On Debian systems the Apache License 2.0 is in /usr/share/common-licenses/Apache-2.0.\n'
			elif grep -q 'Mozilla Public License' "$lic" && grep -q '2\.0' "$lic"; then
				printf 'License: MPL-2.0\n On Debian systems the Mozilla Public License 2.0 is in /usr/share/common-licenses/MPL-2.0.\n'
			else
				printf 'License: %s\n' "$path"
				sed -e 's/[[:space:]]*$//' -e 's/^$/./' -e 's/^/ /' "$lic"
			fi
		done
} >"$debian/copyright"
grep -q '^Files: go/\*' "$debian/copyright" || die "writing the copyright file failed"

find "$root" -type d -exec chmod 0755 {} +
find "$root" "$debian" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

# nfpm, built from its own module (tools/nfpm: its go.mod pins it), reads
# dist/nfpm.yaml with these variables; it writes the package, named as
# dpkg and rpm name them, and prints its path.
if ! (cd tools/nfpm && GOWORK=off CGO_ENABLED=0 go build -o "$work/nfpm" .) >"$work/nfpm.log" 2>&1; then
	cat "$work/nfpm.log" >&2
	die "building nfpm (tools/nfpm) failed"
fi
mkdir -p "$out"
for packager in "$@"; do
	if [ "$packager" = deb ]; then
		mv "$root/usr/share/doc/electd/CHANGELOG.md" "$work/CHANGELOG.md"
		touch -h -d "@$SOURCE_DATE_EPOCH" "$root/usr/share/doc/electd"
	fi
	STAGE=$root DEBIAN=$debian PKG_ARCH=$goarch PKG_VERSION=$version PKG_MAINTAINER=$maintainer \
		DEB_DEPENDS=$depends "$work/nfpm" -f dist/nfpm.yaml -p "$packager" -t "$out"
	if [ "$packager" = deb ]; then
		mv "$work/CHANGELOG.md" "$root/usr/share/doc/electd/CHANGELOG.md"
		touch -h -d "@$SOURCE_DATE_EPOCH" "$root/usr/share/doc/electd"
	fi
done
