#!/bin/sh
# The test command (the README's second command; .ci/run runs it and nothing else): installs what
# the tests need, then runs every test once, each suite in the build that checks it best:
#   1. the release build, the .deb, and the end-to-end suites against the release binary (users run
#      that one; an optimizer bug or a lifetime that ends early under -O shows only there);
#   2. the engine, fetcher, proxy and in-process FUSE suites under ThreadSanitizer (any data race
#      fails the run), less the 10,000-file status page test, which spends its time filling a cache;
#   3. everything else on the debug build, and that status page test.
# Stops at the first step that fails and exits non-zero. Needs Swift 6.1+ on PATH.
set -eu
cd "$(dirname "$0")/.."
e2e='EndToEndTests|MountDaemonTests|SharedCacheTests'
tsan='CacheCoreTests|FetcherTests|ProxyTests|FuseEngineTests|FusePlumbingTests|FuseTreeTests|PassthroughTests|PageCacheFill'
slow_under_tsan='StatusPageScaleTests'

mount-helpers/setup-debian.sh --test
swift build -c release
HTTPCACHEFS_DEB=$(mount-helpers/build-deb.sh)
export HTTPCACHEFS_DEB
HTTPCACHEFS_BINARY=$PWD/.build/release/httpcachefs swift test --disable-swift-testing --filter "$e2e"
swift test --disable-swift-testing --sanitize=thread --scratch-path .build-tsan --filter "$tsan" --skip "$slow_under_tsan"
swift test --disable-swift-testing --skip "$e2e|$tsan"
swift test --disable-swift-testing --skip-build --filter "$slow_under_tsan"
