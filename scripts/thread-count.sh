#!/bin/bash
# thread-count.sh BINARY [mixed|eight] — the threads of a running mount daemon under load, the
# figure of docs/threads.md (issue 37: under 16, idle and under load). Root, with nginx installed;
# about a minute. Traffic stays on loopback (nginx on 127.0.0.1:18091, the proxy on 18092).
#
#   mixed (default): a mount with its proxy and four 200 MB files; three readers through the
#                    mount and one through the proxy at once, cold, then warm; idle before and 35 s
#                    after. Prints the highest count sampled every 50 ms, and the threads by name.
#   eight:           eight 100 MB files, --no-passthrough; all read once, then two rounds of eight
#                    readers at once with the page cache dropped before each (the `players` figure
#                    of `httpcachefs-bench datapath`).
#
# SETTLE=seconds between the mount and the load (default 3; Swift concurrency's two threads from
# the daemon's start end about 5 s after it). WORK=dir keeps the files between runs.
set -euo pipefail
BIN=$(realpath "${1:?usage: thread-count.sh BINARY [mixed|eight]}")
MODE=${2:-mixed}
WORK=${WORK:-/tmp/httpcachefs-thread-count}
WWW=$WORK/www CACHE=$WORK/cache MNT=$WORK/mnt
mkdir -p "$WWW" "$MNT"
rm -rf "$CACHE"; mkdir -p "$CACHE"

if [ "$MODE" = eight ]; then files=(g1 g2 g3 g4 g5 g6 g7 g8); size=100M; else files=(f1 f2 f3 f4); size=200M; fi
for f in "${files[@]}"; do [ -f "$WWW/$f.bin" ] || head -c $size /dev/urandom > "$WWW/$f.bin"; done

cat > "$WORK/nginx.conf" <<EOF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 256; }
http { access_log off; sendfile on; server { listen 127.0.0.1:18091; root $WWW; } }
EOF
nginx -c "$WORK/nginx.conf"
PID=
cleanup() {
    mountpoint -q "$MNT" && fusermount3 -u "$MNT" 2>/dev/null || true
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
    kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
}
trap cleanup EXIT

urls=(); for f in "${files[@]}"; do urls+=("http://127.0.0.1:18091/$f.bin"); done
extra=(); [ "$MODE" = eight ] && extra+=(--no-passthrough)
"$BIN" mount "$MNT" "${urls[@]}" --foreground --cache-dir "$CACHE" --proxy-port 18092 "${extra[@]}" > "$WORK/daemon.log" 2>&1 &
PID=$!
for _ in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { echo "not mounted; see $WORK/daemon.log" >&2; exit 1; }
sleep "${SETTLE:-3}"

count() { ls /proc/$PID/task | wc -l; }
names() { cat /proc/$PID/task/*/comm | sed 's/-[0-9]*$/-N/' | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}'; echo; }
# Runs the readers given as commands at once; prints the highest thread count while they run.
under_load() {
    local label=$1; shift
    local pids=() max=0 maxnames="" started ended
    started=$(date +%s.%N)
    for cmd in "$@"; do bash -c "$cmd" & pids+=($!); done
    while :; do
        local alive=0
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        local n; n=$(count); if [ "$n" -gt "$max" ]; then max=$n; maxnames=$(names); fi
        sleep 0.05
    done
    wait "${pids[@]}"
    ended=$(date +%s.%N)
    echo "$label: max $max, $(echo "$ended - $started" | bc) s   $maxnames"
}

echo "idle: $(count)   $(names)"
if [ "$MODE" = eight ]; then
    readers=(); for f in "${files[@]}"; do readers+=("cat $MNT/$f.bin > /dev/null"); done
    under_load cold "${readers[@]}"
    for round in 1 2; do
        sync; echo 1 > /proc/sys/vm/drop_caches
        under_load "warm, page cache dropped ($round)" "${readers[@]}"
    done
else
    url=$("$BIN" url "$MNT/f4.bin" --cache-dir "$CACHE")
    readers=("cat $MNT/f1.bin > /dev/null" "cat $MNT/f2.bin > /dev/null" "cat $MNT/f3.bin > /dev/null" "curl -sf -o /dev/null '$url'")
    under_load cold "${readers[@]}"
    under_load warm "${readers[@]}"
    sleep 35
    echo "idle 35 s after: $(count)   $(names)"
fi
