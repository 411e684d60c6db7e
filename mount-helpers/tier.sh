#!/bin/bash
# Runs one httpcachefs cache tier node: nginx with `slice` + `proxy_cache` in front of one origin.
#
#   tier.sh --origin URL --port P --cache-dir DIR [--size 20G] [--slice 4M] [--bind ADDR]
#           [--ca-certificate PEM] [--user USER]
#   tier.sh --stop --cache-dir DIR
#
# Writes DIR/nginx.conf from tier-nginx.conf.in (next to this script, or in
# ../share/httpcachefs/ when installed as httpcachefs-tier) and starts nginx with its pid, temporary files, logs and cache all
# under DIR (DIR/access.log shows each request and whether it was a HIT or a MISS). Works as a
# normal user (a port above 1023) and as root (workers run as --user, default nobody, and own
# DIR's cache; DIR's parents must let them through). URL is the origin, http:// or https:// (TLS with SNI, verified against the
# system's CAs or --ca-certificate), with an optional path prefix: only paths under it are
# served. The node forwards only to that origin. --slice must match the daemons'
# --tier ...,slice=SIZE (both default to 4M). --stop stops the node that uses DIR.
# Daemons use it with: httpcachefs ... --tier URL=http://THIS-HOST:P[,http://OTHER-NODE:P]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
origin="" port="" dir="" size=20G slice=4M bind="" ca="" user="" stop=0

usage() { sed -n '2,18s/^# \{0,1\}//p' "$0"; }
need() { [ $# -ge 2 ] || { echo "tier.sh: $1 needs a value" >&2; exit 64; }; }
while [ $# -gt 0 ]; do
    case $1 in
        --origin) need "$@"; origin=$2; shift 2 ;;
        --port) need "$@"; port=$2; shift 2 ;;
        --cache-dir) need "$@"; dir=$2; shift 2 ;;
        --size) need "$@"; size=$2; shift 2 ;;
        --slice) need "$@"; slice=$2; shift 2 ;;
        --bind) need "$@"; bind=$2; shift 2 ;;
        --ca-certificate) need "$@"; ca=$2; shift 2 ;;
        --user) need "$@"; user=$2; shift 2 ;;
        --stop) stop=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "tier.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
    esac
done

[ -n "$dir" ] || { echo "tier.sh: --cache-dir DIR is required" >&2; exit 64; }
case $dir in /*) ;; *) dir=$(pwd)/$dir ;; esac

if [ "$stop" = 1 ]; then
    pidfile=$dir/nginx.pid
    [ -s "$pidfile" ] || { echo "tier.sh: no tier node runs with $dir (no $pidfile)" >&2; exit 1; }
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || { echo "tier.sh: the node ($pid) had already stopped" >&2; rm -f "$pidfile"; exit 0; }
    i=0
    while kill -0 "$pid" 2>/dev/null; do
        i=$((i + 1))
        [ $i -le 100 ] || { echo "tier.sh: nginx $pid did not stop within 10 s" >&2; exit 1; }
        sleep 0.1
    done
    echo "stopped the tier node of $dir"
    exit 0
fi

[ -n "$origin" ] || { echo "tier.sh: --origin URL is required" >&2; exit 64; }
[ -n "$port" ] || { echo "tier.sh: --port P is required" >&2; exit 64; }
case $port in *[!0-9]*|'') echo "tier.sh: invalid port '$port'" >&2; exit 64 ;; esac
[ "$port" -ge 1 ] && [ "$port" -le 65535 ] || { echo "tier.sh: port $port is not from 1 to 65535" >&2; exit 64; }
case $slice in *[!0-9kKmM]*|'') echo "tier.sh: invalid slice size '$slice' (e.g. 4M, 1M, 512K)" >&2; exit 64 ;; esac
case $size in *[!0-9kKmMgG]*|'') echo "tier.sh: invalid size '$size' (e.g. 20G)" >&2; exit 64 ;; esac

# URL → scheme, host[:port], path prefix.
case $origin in
    http://*) scheme=http; rest=${origin#http://}; default_port=80 ;;
    https://*) scheme=https; rest=${origin#https://}; default_port=443 ;;
    *) echo "tier.sh: --origin must be an http:// or https:// URL, not '$origin'" >&2; exit 64 ;;
esac
case $rest in *\?*|*\#*|*@*) echo "tier.sh: --origin takes no query, fragment or user: '$origin'" >&2; exit 64 ;; esac
hostport=${rest%%/*}
prefix=${rest#"$hostport"}
prefix=${prefix%/}
[ -n "$hostport" ] || { echo "tier.sh: no host in '$origin'" >&2; exit 64; }
case $prefix in *[!A-Za-z0-9/._~%-]*) echo "tier.sh: unsupported characters in the path prefix '$prefix'" >&2; exit 64 ;; esac
case $hostport in
    \[*\]:*) host=${hostport%:*}; hport=${hostport##*:} ;;
    \[*\]) host=$hostport; hport=$default_port ;;
    *:*) host=${hostport%%:*}; hport=${hostport#*:} ;;
    *) host=$hostport; hport=$default_port ;;
esac
case $hport in *[!0-9]*|'') echo "tier.sh: invalid origin port in '$origin'" >&2; exit 64 ;; esac
hostport=$host:$hport
sslhost=$(printf '%s' "$host" | tr -d '[]')

template=""
for t in "$here/tier-nginx.conf.in" "$here/../share/httpcachefs/tier-nginx.conf.in" /usr/share/httpcachefs/tier-nginx.conf.in; do
    [ -f "$t" ] && { template=$t; break; }
done
[ -n "$template" ] || { echo "tier.sh: tier-nginx.conf.in not found next to $0 or in /usr/share/httpcachefs" >&2; exit 1; }
nginx=$(command -v nginx 2>/dev/null || true)
[ -n "$nginx" ] || { [ -x /usr/sbin/nginx ] && nginx=/usr/sbin/nginx; }
[ -n "$nginx" ] || { echo "tier.sh: nginx is not installed (Debian: apt-get install nginx-light)" >&2; exit 1; }
"$nginx" -V 2>&1 | grep -q -- '--with-http_slice_module' || {
    echo "tier.sh: $nginx has no slice module (Debian's nginx-light and nginx have it)" >&2; exit 1; }

mkdir -p "$dir/cache" "$dir/tmp"
if [ -s "$dir/nginx.pid" ] && kill -0 "$(cat "$dir/nginx.pid")" 2>/dev/null; then
    echo "tier.sh: a tier node already runs with $dir (pid $(cat "$dir/nginx.pid")); stop it first with --stop" >&2
    exit 1
fi

user_line=""
if [ "$(id -u)" = 0 ]; then
    [ -n "$user" ] || user=nobody
    id "$user" >/dev/null 2>&1 || { echo "tier.sh: no user '$user' for the workers (--user)" >&2; exit 64; }
    group=$(id -gn "$user")
    user_line="user $user $group;"
    chown -R "$user:$group" "$dir/cache" "$dir/tmp"
    # The workers must reach DIR through its parents (a private 0700 parent stops them).
    if [ "$user" != root ] && command -v runuser >/dev/null 2>&1 &&
       ! runuser -u "$user" -- test -w "$dir/cache" -a -x "$dir/cache"; then
        echo "tier.sh: nginx workers run as '$user' and cannot write $dir/cache (a parent directory is closed to them): choose a DIR they can reach, or --user root" >&2
        exit 1
    fi
elif [ -n "$user" ]; then
    echo "tier.sh: --user needs root (the workers run as the caller otherwise)" >&2; exit 64
fi

listen=$port
if [ -n "$bind" ]; then
    case $bind in *:*) listen="[$bind]:$port" ;; *) listen="$bind:$port" ;; esac
fi
if [ "$scheme" = https ]; then
    cafile=${ca:-/etc/ssl/certs/ca-certificates.crt}
    [ -f "$cafile" ] || { echo "tier.sh: no CA bundle at $cafile (--ca-certificate PEM)" >&2; exit 64; }
    ssl_lines="            proxy_ssl_verify on;
            proxy_ssl_verify_depth 4;
            proxy_ssl_trusted_certificate $cafile;"
else
    ssl_lines=""
fi
if [ -n "$prefix" ]; then
    location="$prefix/"
    other="        location / { return 404; }"
else
    location="/"
    other=""
fi

conf=$dir/nginx.conf
tmp=$conf.tmp.$$
# Replace each @NAME@ from the environment: awk takes the values verbatim.
DIR=$dir LISTEN=$listen SIZE=$size SLICE=$slice ORIGIN_HOSTPORT=$hostport ORIGIN_HOST=$sslhost \
ORIGIN_SCHEME=$scheme LOCATION=$location USER_LINE=$user_line SSL_LINES=$ssl_lines OTHER_LOCATION=$other \
awk '{
    n = split("DIR LISTEN SIZE SLICE ORIGIN_HOSTPORT ORIGIN_HOST ORIGIN_SCHEME LOCATION USER_LINE SSL_LINES OTHER_LOCATION", names, " ")
    for (i = 1; i <= n; i++) {
        key = "@" names[i] "@"
        while ((p = index($0, key)) > 0) $0 = substr($0, 1, p - 1) ENVIRON[names[i]] substr($0, p + length(key))
    }
    print
}' "$template" > "$tmp"
mv "$tmp" "$conf"

"$nginx" -t -q -p "$dir" -c "$conf" -e "$dir/error.log" || { echo "tier.sh: nginx refused $conf (see above)" >&2; exit 1; }
# The node outlives this script: it must not keep a descriptor the caller watches for this
# script's end (a pipe, or a test runner's process monitor). bash closes any fd by number.
for fd in /proc/$$/fd/*; do
    fd=${fd##*/}
    case $fd in 0|1|2) ;; *[!0-9]*) ;; *) eval "exec $fd>&-" 2>/dev/null || true ;; esac
done
"$nginx" -p "$dir" -c "$conf" -e "$dir/error.log" </dev/null
# nginx forks and returns once the master wrote its pid; the listener is open by then.
echo "tier node for $origin listening on ${bind:-*}:$port, cache in $dir (slice $slice, size $size)"
