#!/bin/sh
# The main job for a new user: mount a media file and play it, with nothing but this checkout.
#
#   mount-helpers/try-it.sh [URL...]
#
# Without URLs it makes a sample MP4 (with ffmpeg if installed, else random bytes), serves it
# from a loopback origin (httpcachefs-bench serve), and mounts it. With URLs it mounts those.
# The mount stays up at $MOUNTPOINT (default /tmp/httpcachefs-demo); the script prints how to
# play it, how to reach it through the proxy, and how to stop everything.
# Environment: MOUNTPOINT, CACHE_DIR, SAMPLES_DIR (default /tmp/httpcachefs-demo-origin),
# ORIGIN_PORT (default 8719; 0 picks a free one), HTTPCACHEFS_OPTS for more
# mount options (e.g. HTTPCACHEFS_OPTS='--proxy-port 0' when port 8718 is taken), and
# HTTPCACHEFS_BIN_DIR for another build (default .build/release; the tests pass their own).
set -eu
cd "$(dirname "$0")/.."
bin=${HTTPCACHEFS_BIN_DIR:-.build/release}
mountpoint=${MOUNTPOINT:-/tmp/httpcachefs-demo}
cache=${CACHE_DIR:-/tmp/httpcachefs-demo-cache}
[ -x "$bin/httpcachefs" ] && [ -x "$bin/httpcachefs-bench" ] || { echo "build first: swift build -c release" >&2; exit 1; }
if grep -q " $mountpoint fuse" /proc/mounts 2>/dev/null; then
    echo "a demo is mounted at $mountpoint already: play it, or stop it first with $bin/httpcachefs unmount $mountpoint" >&2
    exit 1
fi

if [ $# -eq 0 ]; then
    samples=${SAMPLES_DIR:-/tmp/httpcachefs-demo-origin}
    mkdir -p "$samples"
    # A sample left by an earlier run is used only if it is a whole, valid MP4 (an interrupted
    # ffmpeg, or random bytes made before ffmpeg was installed, are not): else it is made afresh.
    sample_ok=no
    if [ -s "$samples/sample.mp4" ]; then
        if command -v ffprobe >/dev/null 2>&1; then
            ffprobe -v error -show_entries format=format_name -of csv=p=0 "$samples/sample.mp4" 2>/dev/null | grep -q mp4 && sample_ok=yes
        elif ! command -v ffmpeg >/dev/null 2>&1; then
            sample_ok=yes   # no ffmpeg to check or remake it with: random bytes are the sample
        fi
    fi
    if [ "$sample_ok" = no ]; then
        rm -f "$samples/sample.mp4"
        if command -v ffmpeg >/dev/null 2>&1; then
            # Without +faststart: the moov atom is at the end, as players find it in the wild.
            ffmpeg -loglevel error -y -f lavfi -i testsrc=duration=30:size=640x360:rate=25 \
                -f lavfi -i sine=frequency=440:duration=30 -c:v libx264 -preset ultrafast -c:a aac \
                -shortest "$samples/sample.mp4"
        else
            head -c 33554432 /dev/urandom > "$samples/sample.mp4"
        fi
    fi
    port=${ORIGIN_PORT:-8719}
    log=$samples.log
    "$bin/httpcachefs-bench" serve "$samples" --port "$port" > "$log" 2>&1 &
    origin_pid=$!
    # Ready once it printed its URLs (it prints them after listening); up to 10 s, in 0.1 s steps.
    tries=0
    until grep -q '^listing: ' "$log" 2>/dev/null; do
        kill -0 "$origin_pid" 2>/dev/null || { echo "the sample origin did not start (port $port; ORIGIN_PORT=N picks another):" >&2; cat "$log" >&2; exit 1; }
        tries=$((tries + 1))
        [ "$tries" -le 100 ] || { echo "the sample origin did not answer within 10 s; see $log" >&2; kill "$origin_pid"; exit 1; }
        sleep 0.1
    done
    base=$(sed -n 's/^listing: //p' "$log" | head -n 1)   # the port it took (ORIGIN_PORT=0)
    set -- "${base}sample.mp4"
    echo "origin: $base (pid $origin_pid, serving $samples; its listing mounts with --index)"
    trap 'kill "$origin_pid" 2>/dev/null' EXIT  # until the mount is up: a failed try leaves nothing running
fi

mkdir -p "$mountpoint"
# shellcheck disable=SC2086  # HTTPCACHEFS_OPTS holds several words
if ! "$bin/httpcachefs" mount "$mountpoint" "$@" --cache-dir "$cache" ${HTTPCACHEFS_OPTS:-}; then
    # The error names httpcachefs's options; through this script they go in HTTPCACHEFS_OPTS.
    echo "try-it.sh: more mount options go in HTTPCACHEFS_OPTS, e.g. HTTPCACHEFS_OPTS='--proxy-port 0' $0${1:+ ...}" >&2
    exit 1
fi
trap - EXIT
echo "mounted at $mountpoint:"
ls -l "$mountpoint"
first=$(ls "$mountpoint" | head -n 1)
if command -v ffprobe >/dev/null 2>&1; then
    echo "ffprobe $mountpoint/$first:"
    ffprobe -v error -show_entries format=duration,size:stream=codec_name -of compact "$mountpoint/$first" || true
fi
echo "proxy URL for URL-only players: $("$bin/httpcachefs" url "$1" --cache-dir "$cache")"
if command -v mpv >/dev/null 2>&1; then
    echo "play:    mpv '$mountpoint/$first'   (or vlc, ffplay, ...)"
else
    echo "play:    mpv '$mountpoint/$first'   (mpv is not installed: mount-helpers/setup-debian.sh --with-mpv; or vlc, ffplay, ...)"
fi
echo "inspect: $bin/httpcachefs cache info '$1' --cache-dir $cache"
echo "stop:    $bin/httpcachefs unmount $mountpoint${origin_pid:+ && kill $origin_pid}"
