#!/usr/bin/env bash
# Builds the Debian package electd_<version>_<arch>.deb with nothing beyond Go,
# a C compiler and dpkg-deb (`make deb` runs it; dpkg-shlibdeps and strip are
# used when present). `make install PREFIX=/usr` lays the files
# out under a staging root, so that the package and a source install cannot
# differ; this adds what a package needs besides: the control file, the
# conffiles, the maintainer scripts of dist/debian, the copyright file (with
# the licenses of the Go modules compiled in), the changelog and md5sums.
#
#   scripts/deb.sh [-o DIR]     the .deb goes to DIR (default bin); its path is printed
#
# DEB_VERSION overrides the version made from `git describe`, DEB_MAINTAINER
# the maintainer (default: the author of the last commit), GOARCH the
# architecture (Go cross-compiles). SOURCE_DATE_EPOCH (default: the last
# commit's time) dates the changelog, the man page and the files.
set -euo pipefail

cd "$(dirname "$0")/.."
out=bin
while getopts o: opt; do
	case $opt in
	o) out=$OPTARG ;;
	*)
		echo "usage: scripts/deb.sh [-o DIR]" >&2
		exit 2
		;;
	esac
done

die() {
	printf 'deb: %s\n' "$*" >&2
	exit 1
}
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing (Debian package dpkg)"

version=${VERSION:-$(scripts/version.sh)}
commit=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
maintainer=${DEB_MAINTAINER:-$(git log -1 --format='%an <%ae>' 2>/dev/null || true)}
[ -n "$maintainer" ] || die "no maintainer: set DEB_MAINTAINER='Name <address>'"

# The Debian version of scripts/version.sh's: 0.9.0 gives 0.9.0-1, 4 commits
# past it 0.9.0+4.gabc1234def0-1, and a prerelease sorts before its release
# with ~: 0.0.0-dev+abc1234def0 gives 0.0.0~dev+abc1234def0-1.
debian_version() {
	local v=${1#v}
	printf '%s-1' "${v/-/\~}"
}
deb_version=${DEB_VERSION:-$(debian_version "$version")}
dpkg --validate-version "$deb_version" 2>/dev/null || die "$deb_version is not a Debian version (DEB_VERSION)"

goarch=$(go env GOARCH)
case $goarch in
amd64 | arm64 | riscv64 | s390x) arch=$goarch ;;
386) arch=i386 ;;
arm) arch=armhf ;;
ppc64le) arch=ppc64el ;;
mips64le) arch=mips64el ;;
loong64) arch=loong64 ;;
*) die "no Debian architecture for GOARCH=$goarch" ;;
esac

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

doc=$root/usr/share/doc/electd
dist=dist/debian

# changelog.Debian: one entry, for this build.
cat >"$work/changelog.Debian" <<EOF
electd ($deb_version) unstable; urgency=medium

  * Built from commit $commit.

 -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
EOF
gzip -9n <"$work/changelog.Debian" >"$doc/changelog.Debian.gz"

# copyright: electd's own license, then every Go module compiled into the
# binary with its license, read from the module cache the build used.
{
	cat <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: electd
Comment: /usr/bin/electd is a Go program, linked statically: the Go standard
 library and the Go modules named in the Files fields below are compiled into
 it, each under its own license.

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
} >"$doc/copyright"
grep -q '^Files: go/\*' "$doc/copyright" || die "writing the copyright file failed"

install -d -m 0755 "$root/usr/share/lintian/overrides"
install -m 0644 "$dist/lintian-overrides" "$root/usr/share/lintian/overrides/electd"
# md5sums: every file but the conffiles (dpkg keeps their sums itself).
find "$root" -path "$root/etc" -prune -o -type f -print | sed "s|^$root/||" | sort |
	(cd "$root" && xargs -d '\n' md5sum) >"$work/md5sums"
install -d -m 0755 "$root/DEBIAN"
mv "$work/md5sums" "$root/DEBIAN/md5sums"
install -m 0755 "$dist/postinst" "$dist/prerm" "$dist/postrm" "$root/DEBIAN/"
(cd "$root" && find etc -type f | sed 's|^|/|' | sort) >"$root/DEBIAN/conffiles"
size=$(du -k -s --apparent-size --exclude=DEBIAN "$root" | cut -f1)
sed -e "s|@VERSION@|$deb_version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" \
	-e "s|@SIZE@|$size|" -e "s|@DEPENDS@|$depends|" "$dist/control" >"$root/DEBIAN/control"
chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/conffiles" "$root/DEBIAN/control"
find "$root" -type d -exec chmod 0755 {} +
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$out"
deb=$out/electd_${deb_version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
