#!/bin/sh
# Builds a Debian package of httpcachefs that needs no Swift toolchain to run.
#
#   mount-helpers/build-deb.sh && sudo dpkg -i .build-deb/httpcachefs_*.deb
#   sudo dpkg -r httpcachefs
#
# The release binary is built with the Swift runtime and Foundation linked in
# (--static-swift-stdlib) in its own scratch path, .build-deb, and checked to need no Swift
# library. The package holds what install.sh installs (it stages it with DESTDIR), at the paths
# Debian uses: /usr/bin/httpcachefs; /sbin/mount.httpcachefs and /sbin/mount.fuse.httpcachefs
# (mount -t fuse.httpcachefs, /etc/fstab); /lib/systemd/system/httpcachefs@.service; a man page
# made from --help (help2man) and /usr/share/doc/httpcachefs. Depends: fuse3 (fusermount3) and
# the Debian packages of the shared libraries the binary needs (libfuse3-3, libcurl4,
# libsqlite3-0, libc6...), as dpkg-shlibdeps finds them.
# Installs what it needs to build (setup-debian.sh --deb) and prints the .deb's path last.
# Variables: SCRATCH (default .build-deb), MAINTAINER (default: git's user.name <user.email>).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
scratch=${SCRATCH:-$repo/.build-deb}
case $scratch in /*) ;; *) scratch=$PWD/$scratch ;; esac

case ${1:-} in
    -h|--help) sed -n '2,17s/^# \{0,1\}//p' "$0"; exit 0 ;;
    "") ;;
    *) echo "build-deb.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
esac

"$here/setup-debian.sh" --deb >&2
[ -x /opt/swift/usr/bin/swift ] && ! command -v swift >/dev/null 2>&1 && PATH=/opt/swift/usr/bin:$PATH

echo "build-deb.sh: building the release binary with the Swift runtime linked in ($scratch)" >&2
swift build --package-path "$repo" -c release --static-swift-stdlib --scratch-path "$scratch" --product httpcachefs >&2
binary=$scratch/release/httpcachefs

# No Swift library may be left to load at run time: none is installed where the package goes.
swift_libs=$(ldd "$binary" | grep -E 'libswift|libFoundation|libdispatch|libBlocksRuntime|lib_Foundation|not found|/opt/swift|/usr/lib/swift' || true)
if [ -n "$swift_libs" ]; then
    echo "build-deb.sh: $binary still needs Swift's shared libraries:" >&2
    echo "$swift_libs" >&2
    exit 1
fi

version=$("$binary" --version)
arch=$(dpkg --print-architecture)
name=httpcachefs_${version}_$arch
root=$scratch/deb/$name
rm -rf "$root"
mkdir -p "$root/DEBIAN"

# The files install.sh installs, staged: the helper and the unit name /usr/bin/httpcachefs.
DESTDIR=$root PREFIX=/usr SBINDIR=/sbin UNITDIR=/lib/systemd/system \
    "$here/install.sh" --binary "$binary" >/dev/null
strip --strip-unneeded "$root/usr/bin/httpcachefs"
grep -q '^installed_binary=/usr/bin/httpcachefs$' "$root/sbin/mount.httpcachefs"
grep -q '^ExecStart=/usr/bin/httpcachefs ' "$root/lib/systemd/system/httpcachefs@.service"
[ -x "$root/usr/bin/httpcachefs-tier" ] && [ -f "$root/usr/share/httpcachefs/tier-nginx.conf.in" ]

# The man page: the top-level --help, then each subcommand's (and the cache subcommands').
mkdir -p "$root/usr/share/man/man1" "$root/usr/share/doc/httpcachefs"
subcommands() {   # the names listed under SUBCOMMANDS: in `httpcachefs $* --help`
    "$binary" "$@" --help | sed -n '/^SUBCOMMANDS:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p'
}
roff_block() {    # text as a preformatted roff block, with roff's special characters escaped
    echo ".nf"
    sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/" -e 's/-/\\-/g'
    echo ".fi"
}
include=$scratch/deb/man-include
{
    echo "[COMMANDS]"
    for cmd in $(subcommands); do
        echo ".SS \"httpcachefs $cmd\""
        "$binary" "$cmd" --help | roff_block
        for sub in $(subcommands "$cmd"); do
            echo ".SS \"httpcachefs $cmd $sub\""
            "$binary" "$cmd" "$sub" --help | roff_block
        done
    done
    echo "[SEE ALSO]"
    echo ".BR mount (8),"
    echo ".BR fusermount3 (1),"
    echo ".BR fstab (5),"
    echo ".BR systemd.unit (5)."
    echo ".PP"
    echo "/usr/share/doc/httpcachefs/README.md"
} > "$include"
help2man --no-info --no-discard-stderr --include "$include" \
    --name "mount HTTP(S) URLs as read-only files and serve them through a local proxy" \
    --output "$scratch/deb/httpcachefs.1" "$binary"
gzip -9n < "$scratch/deb/httpcachefs.1" > "$root/usr/share/man/man1/httpcachefs.1.gz"

doc=$root/usr/share/doc/httpcachefs
gzip -9n < "$repo/README.md" > "$doc/README.md.gz"
cat > "$doc/copyright" <<EOF
httpcachefs $version: mount HTTP(S) URLs as files and serve them through a local proxy.
Built from $(git -C "$repo" describe --always --dirty 2>/dev/null || echo "a source tree without git").

The binary links in, statically, the Swift runtime, standard library and Foundation (Apache
License 2.0 with Runtime Library Exception, https://swift.org/LICENSE.txt) and these packages:
swift-nio, swift-argument-parser, swift-log, swift-metrics, swift-atomics, swift-collections,
swift-system (Apache License 2.0, /usr/share/common-licenses/Apache-2.0), swift-prometheus
(Apache License 2.0) and GRDB.swift (MIT License). It loads libfuse3, libcurl and libsqlite3
from their Debian packages, which carry their own copyright files.
EOF

maintainer=${MAINTAINER:-$(git -C "$repo" config user.name 2>/dev/null || true) <$(git -C "$repo" config user.email 2>/dev/null || true)>}
[ "$maintainer" != " <>" ] || maintainer="httpcachefs builder <root@$(hostname)>"
# Depends: the packages of the shared libraries the binary loads (dpkg-shlibdeps needs a
# debian/control to run in), and fuse3 for fusermount3, which unmounts.
shlibs=$scratch/deb/shlibdeps
rm -rf "$shlibs" && mkdir -p "$shlibs/debian"
printf 'Source: httpcachefs\n\nPackage: httpcachefs\nArchitecture: any\n' > "$shlibs/debian/control"
libdeps=$(cd "$shlibs" && dpkg-shlibdeps -O "$root/usr/bin/httpcachefs" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$libdeps" ] || { echo "build-deb.sh: dpkg-shlibdeps found no dependencies of $binary" >&2; exit 1; }
cat > "$root/DEBIAN/control" <<EOF
Package: httpcachefs
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: fuse3, $libdeps
Suggests: nginx-light | nginx
Section: utils
Priority: optional
Description: mount HTTP(S) URLs as read-only files, with a persistent cache
 httpcachefs mounts remote media (single URLs, URL lists, directory listings)
 as read-only files with FUSE, and serves the same files through a local HTTP
 proxy, from one persistent on-disk cache that fetches only the byte ranges
 that are read. Includes the mount(8) helper (mount -t fuse.httpcachefs,
 /etc/fstab), the systemd unit httpcachefs@NAME, and httpcachefs-tier, which
 runs an nginx cache tier node shared by a fleet of hosts (Suggests: nginx-light).
EOF

# Maintainer scripts. postinst: the directories a root mount and the systemd instances use by
# default (/var/cache/httpcachefs/NAME, logs in /var/log/httpcachefs, /etc/httpcachefs/NAME.conf).
# prerm: on removal, stop running httpcachefs@NAME instances, whose mounts must not outlive the
# binary (an upgrade leaves them running on the old one). postrm: purge removes caches and logs,
# unless a daemon still holds a cache there (its `lock` file flocked: a mount not run as a unit,
# which prerm does not stop): then it refuses, names the holder, and a purge once it has stopped
# removes them (removing a cache under its daemon would wipe what it is serving).
cat > "$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    install -d -m 0755 /etc/httpcachefs /var/cache/httpcachefs /var/log/httpcachefs
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then systemctl daemon-reload || true; fi
fi
exit 0
EOF
cat > "$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    for unit in $(systemctl list-units --all --plain --no-legend 'httpcachefs@*.service' | awk '{print $1}'); do
        systemctl stop "$unit" || true
    done
fi
exit 0
EOF
cat > "$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then systemctl daemon-reload || true; fi
if [ "$1" = purge ]; then
    # A daemon holds its cache's lock (flock) for its whole life; the file names it.
    held=""
    if [ -d /var/cache/httpcachefs ]; then
        held=$(find /var/cache/httpcachefs -maxdepth 3 -type f -name lock -exec sh -c \
            'flock -n "$1" true 2>/dev/null || printf " %s (%s)" "${1%/lock}" "$(head -c 200 "$1" | tr -d "\n")"' _ {} \; 2>/dev/null || true)
    fi
    if [ -n "$held" ]; then
        echo "httpcachefs: not removing /var/cache/httpcachefs and /var/log/httpcachefs: a running httpcachefs daemon holds a cache there:$held." >&2
        echo "httpcachefs: unmount it (umount MOUNTPOINT), then run 'dpkg --purge httpcachefs' again." >&2
        exit 1
    fi
    rm -rf /var/cache/httpcachefs /var/log/httpcachefs; rmdir /etc/httpcachefs 2>/dev/null || true
fi
exit 0
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"

deb=$scratch/$name.deb
dpkg-deb --build --root-owner-group "$root" "$deb" >&2
echo "$deb"
