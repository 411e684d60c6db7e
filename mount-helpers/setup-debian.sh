#!/bin/sh
# Installs the Debian packages httpcachefs needs, if any are missing.
#   setup-debian.sh             what building and mounting need
#   setup-debian.sh --test      also what the tests need (ffmpeg for the player tests, chromium
#                               for the status page, prometheus for promtool) and checks that the
#                               toolchain has ThreadSanitizer (the test command uses it)
#   setup-debian.sh --with-mpv  also mpv, the player try-it.sh suggests (combines with --test)
# Runs apt-get through sudo when not root. Swift itself is expected on PATH (see README).
set -eu

packages="pkg-config libfuse3-dev fuse3 libcurl4-openssl-dev libsqlite3-dev curl ca-certificates"
test=0
for arg in "$@"; do
    case $arg in
        --test) test=1; packages="$packages ffmpeg chromium prometheus" ;;
        --with-mpv) packages="$packages mpv" ;;
        *) echo "setup-debian.sh: unknown argument '$arg' (known: --test, --with-mpv)" >&2; exit 64 ;;
    esac
done

missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done

if [ -n "$missing" ]; then
    echo "httpcachefs setup: installing$missing" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >&2
fi

swift=$(command -v swift 2>/dev/null || true)
[ -n "$swift" ] || { [ -x /opt/swift/usr/bin/swift ] && swift=/opt/swift/usr/bin/swift; } || {
    echo "httpcachefs setup: no Swift toolchain found (need Swift 6.1 or later on PATH)" >&2
    exit 1
}

# `swift test --sanitize=thread` links clang's TSan runtime from the toolchain itself.
if [ "$test" = 1 ]; then
    toolchain=$(dirname "$(dirname "$(readlink -f "$swift")")")
    ls "$toolchain"/lib/clang/*/lib/linux/libclang_rt.tsan-*.a >/dev/null 2>&1 ||
    ls "$toolchain"/lib/swift/clang/lib/linux/libclang_rt.tsan-*.a >/dev/null 2>&1 || {
        echo "httpcachefs setup: the Swift toolchain at $toolchain has no ThreadSanitizer runtime (libclang_rt.tsan); the tests need one" >&2
        exit 1
    }
fi
