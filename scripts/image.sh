#!/usr/bin/env bash
# Builds electd's container image (dist/container/Dockerfile) as IMAGE
# (default electd:VERSION, VERSION from scripts/version.sh), with docker,
# podman or buildah, whichever is found first (docker only when its daemon
# answers; BUILDER overrides). buildah and podman are run with the vfs
# storage driver and chroot isolation, which need no daemon and work inside
# another container.
#
#   scripts/image.sh    `make image` runs it; prints the image's name
set -euo pipefail

cd "$(dirname "$0")/.."
die() {
	printf 'image: %s\n' "$*" >&2
	exit 1
}
version=${VERSION:-$(scripts/version.sh)}
commit=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
# An image tag holds no +: 0.0.0-dev+abc becomes 0.0.0-dev_abc.
image=${IMAGE:-electd:${version//+/_}}
builder=${BUILDER:-}
if [ -z "$builder" ]; then
	for b in docker podman buildah; do
		command -v "$b" >/dev/null || continue
		# A docker client without a daemon to talk to cannot build: try
		# the daemonless ones next.
		if [ "$b" = docker ] && ! docker info >/dev/null 2>&1; then
			echo "image: docker is installed but its daemon does not answer; trying podman, then buildah" >&2
			continue
		fi
		builder=$b
		break
	done
fi
[ -n "$builder" ] || die "no docker, podman or buildah (Debian: apt-get install buildah)"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/empty"
# Static: the base has no C library.
export CGO_ENABLED=0
for b in electd electd-shim; do
	go build -trimpath -ldflags "-s -w -X main.version=$version -X main.commit=$commit" -o "$ctx/$b" "./cmd/$b" ||
		die "go build ./cmd/$b failed"
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nelectd:x:65532:65532:electd:/var/lib/electd:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nelectd:x:65532:\n' >"$ctx/group"
cp dist/container/Dockerfile "$ctx/"

case $builder in
buildah) "$builder" --storage-driver vfs bud --isolation chroot -q -t "$image" "$ctx" >&2 ;;
podman) "$builder" --storage-driver vfs build --isolation chroot -q -t "$image" "$ctx" >&2 ;;
*) "$builder" build -q -t "$image" "$ctx" >&2 ;;
esac
echo "$image"
