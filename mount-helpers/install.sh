#!/bin/sh
# Installs httpcachefs: the release binary, the mount(8) helper and the systemd unit.
#
#   swift build -c release && sudo mount-helpers/install.sh
#   sudo mount-helpers/install.sh --uninstall
#
# Options: --binary PATH (default: .build/release/httpcachefs of this checkout), --uninstall.
# Variables, as make install has them:
#   PREFIX   where the binary goes, as $PREFIX/bin/httpcachefs (default /usr/local)
#   DESTDIR  a staging root put in front of every path (packaging); the files still name the
#            final paths
#   SBINDIR  where the mount helper goes (default /sbin: mount(8) looks for mount.TYPE helpers
#            in /sbin, /sbin/fs.d and /sbin/fs only, whatever PREFIX is)
#   UNITDIR  where the systemd unit goes (default /etc/systemd/system)
# Installed: $PREFIX/bin/httpcachefs (0755); $SBINDIR/mount.httpcachefs (0755) and
# $SBINDIR/mount.fuse.httpcachefs (a symlink to it), for `-t httpcachefs` and `-t fuse.httpcachefs`;
# $UNITDIR/httpcachefs@.service (0644); $PREFIX/bin/httpcachefs-tier (tier.sh, 0755: runs an
# nginx cache tier node) and $PREFIX/share/httpcachefs/tier-nginx.conf.in (its template, 0644).
# The helper and the unit run $PREFIX/bin/httpcachefs.
# Uninstall removes exactly these files (same variables), after stopping and disabling every
# httpcachefs@NAME instance (on a running systemd; else it removes their .wants links, which
# would point at nothing); caches, logs and /etc/httpcachefs stay.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
prefix=${PREFIX:-/usr/local}
destdir=${DESTDIR:-}
sbindir=${SBINDIR:-/sbin}
unitdir=${UNITDIR:-/etc/systemd/system}
binary=$here/../.build/release/httpcachefs
action=install

usage() { sed -n '2,20s/^# \{0,1\}//p' "$0"; }
while [ $# -gt 0 ]; do
    case $1 in
        --uninstall) action=uninstall; shift ;;
        --binary) [ $# -ge 2 ] || { echo "install.sh: --binary needs a path" >&2; exit 64; }; binary=$2; shift 2 ;;
        --binary=*) binary=${1#--binary=}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
    esac
done
case $prefix in /*) ;; *) echo "install.sh: PREFIX must be an absolute path, not '$prefix'" >&2; exit 64 ;; esac

bin_path=$prefix/bin/httpcachefs
helper=$destdir$sbindir/mount.httpcachefs
helper_link=$destdir$sbindir/mount.fuse.httpcachefs
unit=$destdir$unitdir/httpcachefs@.service
tier=$destdir$prefix/bin/httpcachefs-tier
tier_template=$destdir$prefix/share/httpcachefs/tier-nginx.conf.in

# systemd reads unit files at daemon-reload; only when installing onto this very system.
reload_systemd() {
    if [ -z "$destdir" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        systemctl daemon-reload
    fi
}

# Enabled instances of the unit: their links in the .wants directories, whatever the target.
enabled_instances() {
    find "$destdir$unitdir" -path '*.wants/httpcachefs@?*.service' -type l 2>/dev/null
}

if [ "$action" = uninstall ]; then
    live_systemd=no
    if [ -z "$destdir" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then live_systemd=yes; fi
    if [ $live_systemd = yes ]; then
        # Running instances too, enabled or not: a mount must not outlive its binary.
        for u in $( { systemctl list-units --all --plain --no-legend 'httpcachefs@*.service' | awk '{print $1}'
                      enabled_instances | sed 's|.*/||'; } | sort -u); do
            systemctl disable --now "$u" && echo "stopped and disabled $u"
        done
    fi
    enabled_instances | while read -r link; do rm -f "$link" && echo "removed $link"; done
    for f in "$destdir$bin_path" "$helper_link" "$helper" "$unit" "$tier" "$tier_template"; do
        if [ -e "$f" ] || [ -L "$f" ]; then rm -f "$f" && echo "removed $f"; fi
    done
    reload_systemd
    exit 0
fi

[ -x "$binary" ] || {
    echo "install.sh: no httpcachefs binary at $binary: build it first (swift build -c release), or pass --binary PATH" >&2
    exit 1
}

install -d "$destdir$prefix/bin" "$destdir$sbindir" "$destdir$unitdir"
install -m 755 "$binary" "$destdir$bin_path"
# The helper runs the binary installed with it (HTTPCACHEFS still overrides).
sed "s|^installed_binary=\$|installed_binary=$bin_path|" "$here/mount.httpcachefs" > "$helper.tmp"
chmod 755 "$helper.tmp" && mv -f "$helper.tmp" "$helper"
ln -sf mount.httpcachefs "$helper_link"
sed "s|/usr/local/bin/httpcachefs|$bin_path|g" "$here/httpcachefs@.service" > "$unit.tmp"
chmod 644 "$unit.tmp" && mv -f "$unit.tmp" "$unit"
install -d "$(dirname "$tier_template")"
install -m 755 "$here/tier.sh" "$tier"
install -m 644 "$here/tier-nginx.conf.in" "$tier_template"
reload_systemd

echo "installed $destdir$bin_path"
echo "installed $helper and $helper_link (mount -t fuse.httpcachefs, /etc/fstab)"
echo "installed $tier and $tier_template (an nginx cache tier node for a fleet: httpcachefs-tier --help)"
echo "installed $unit (systemctl enable --now httpcachefs@NAME mounts what /etc/httpcachefs/NAME.conf describes on /mnt/NAME)"
case ":$PATH:" in *":$prefix/bin:"*) ;; *) echo "note: $prefix/bin is not on PATH" ;; esac
