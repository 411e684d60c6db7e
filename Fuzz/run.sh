#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for a bounded time, one after the other, starting
# from its seed corpus in Tests/FuzzCorpus/<target>/; prints executions, coverage and crashes.
#
#   Fuzz/run.sh [SECONDS-PER-TARGET] [TARGET...]      default: 60 seconds, every target
#   Fuzz/run.sh --merge [TARGET...]                   fold what the runs found into each seed
#                                                     corpus, minimised: -merge=1 keeps one input
#                                                     per covered edge (-use_counters=0), so it
#                                                     stays small (hit counts are found again fast)
#
# Inputs found during a run go to Fuzz/.build/fuzz-work/<target>/corpus (not committed); a crash
# or broken invariant leaves its input in Fuzz/.build/fuzz-work/<target>/artifacts/, and
# `.build/debug/<target> ARTIFACT` replays it. Run it niced on a shared machine:
#   nice -n 19 Fuzz/run.sh 300
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
all=(FuzzByteRanges FuzzProxyURL FuzzHLSPlaylist FuzzDirectoryListing FuzzURLList FuzzConfigFile
     FuzzResponseHeaders FuzzReadPlanner FuzzHostHeader FuzzWebDAVListing FuzzURLSpelling)

merge=no
seconds=60
if [[ ${1:-} == --merge ]]; then merge=yes; shift
elif [[ ${1:-} =~ ^[0-9]+$ ]]; then seconds=$1; shift
fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")

# A path dependency is known by its directory's name: a checkout called "fuzz" would clash with
# this package's own identity (SwiftPM resolves symlinks, so none can hide it).
package=$here
if [[ $(basename "$root" | tr '[:upper:]' '[:lower:]') == fuzz ]]; then
    echo "run.sh: the checkout directory is called '$(basename "$root")', which clashes with the Fuzz package's identity; clone it under another name" >&2
    exit 2
fi

# libFuzzer reports crashes itself; Swift's backtracer would only race with it and with ASan.
export SWIFT_BACKTRACE=enable=no
build=(swift build --package-path "$package" -c debug -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library)
"${build[@]}" >&2
bin=$("${build[@]}" --show-bin-path)

[[ $merge == yes ]] || printf '%-22s %12s %8s %8s %7s %s\n' target executions cov ft crashes result
status=0
for t in "${targets[@]}"; do
    seeds=$root/Tests/FuzzCorpus/$t
    work=$package/.build/fuzz-work/$t
    mkdir -p "$seeds" "$work/corpus" "$work/artifacts"
    log=$work/last.log
    if [[ $merge == yes ]]; then
        fresh=$work/merged
        rm -rf "$fresh" && mkdir -p "$fresh"
        "$bin/$t" -merge=1 -use_counters=0 "$fresh" "$seeds" "$work/corpus" >"$log" 2>&1
        rm -rf "$seeds" && mv "$fresh" "$seeds"
        echo "$t: $(ls "$seeds" | wc -l) seed inputs, $(cat "$seeds"/* | wc -c) bytes"
        continue
    fi
    before=$(ls "$work/artifacts" | wc -l)
    result=ok
    # FoundationXML (swift-corelibs-foundation) leaks the CFError it makes in libxml2's error
    # callback, 72 bytes per malformed document: not this parser's, and LeakSanitizer would stop
    # the WebDAV run at its first malformed input. Memory errors are still caught.
    extra=() asan=${ASAN_OPTIONS:-}
    [[ $t == FuzzWebDAVListing ]] && { extra=(-detect_leaks=0); asan=detect_leaks=0${asan:+:$asan}; }
    ASAN_OPTIONS=$asan "$bin/$t" "${extra[@]}" -max_total_time="$seconds" -timeout=10 -max_len=8192 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" >"$log" 2>&1 || result="crash (see $log)"
    crashes=$(( $(ls "$work/artifacts" | wc -l) - before ))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    printf '%-22s %12s %8s %8s %7s %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$crashes" "$result"
    [[ $result == ok ]] || status=1
done
exit $status
