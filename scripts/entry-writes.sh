#!/bin/sh
# The one write to an entry's state the compiler cannot refuse: replacing an entry's whole machine.
# The machine's state has setters inside the EntryMachine module only (`package internal(set)`,
# `package private(set)`), so a write to any part of it from CacheCore does not compile, nor does
# `var m = entry.machine; m.reads.hits += 1`. But `EntryState.machine` itself must stay settable
# for the engine to call the machine's mutating events in place, so `entry.machine = other` (a
# fresh machine, or another entry's) would compile: this prints each assignment to, or `inout`
# use of, a `machine` outside EntryState's initializer, with file and line, and exits 1 if there
# is any. No argument: every CacheCore source; or the files given. EntryMachineWallTests runs it.
cd "$(dirname "$0")/.." || exit 2
[ $# -gt 0 ] || set -- $(find Sources/CacheCore -name '*.swift' | sort)
[ $# -gt 0 ] || { echo "entry-writes.sh: no sources under Sources/CacheCore" >&2; exit 2; }
grep -nE '\bmachine *=[^=]|&[A-Za-z_.]*\bmachine\b|swap\([^)]*\bmachine\b' "$@" /dev/null \
    | grep -vE '^Sources/CacheCore/Entry/EntryState\.swift:[0-9]+: +self\.machine = EntryStateMachine\(' && exit 1
exit 0
