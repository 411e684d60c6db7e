#!/bin/sh
# Writes to an entry's state outside its state machine (issue 37): prints each one it finds,
# with file and line, and exits 1 if there is any. No argument: every CacheCore source except the
# machine's own files (Sources/CacheCore/Entry/EntryStateMachine*.swift); or the files given.
# EntryStateMachineContentTests runs it, so the suite fails when a write appears.
#
# What it checks, through an entry variable (entry / e / existing):
#  1. an assignment or compound assignment to an EntryState field (the old fields: id, info,
#     coverage, pending, inflight, waiters, slice sizes and accesses, pins, counts, marks,
#     errors, savedRow; and `machine` itself), or to a part of one (`entry.info.url = ...`);
#  2. a mutating call on such a field (`entry.coverage.insert(...)`, `entry.inflight.start(...)`);
#  3. such a field passed `inout` (`&entry.coverage`);
#  4. any reach into the machine's own storage, read or write: `.machine.content`,
#     `.machine.reads`, `.machine.state` (EntryState's get-only fields read them), and calls of
#     its internal setters `.machine.store(` / `.machine.changeFacts(`: calls of the machine's
#     events and queries, `entry.machine.event(...)`, are how the rest changes it.
# The compiler enforces 1-3 as well (EntryState's fields are get-only forwards to the machine);
# this script shows it, and catches 4, which Swift's access control cannot express.
cd "$(dirname "$0")/.." || exit 2
[ $# -gt 0 ] || set -- $(find Sources/CacheCore -name '*.swift' ! -name 'EntryStateMachine*.swift' | sort)
[ $# -gt 0 ] || { echo "entry-writes.sh: no sources under Sources/CacheCore" >&2; exit 2; }
V='\b(entry|e|existing)'
F='(id|info|coverage|pending|inflight|waiters|sliceBytes|sliceAccess|pins|evicting|hits|misses|bytesFromCache|bytesFromOrigin|unknownLengthLimit|unreadAhead|unverified|verifyQueued|timedOut|lastAccess|readStatsDirty|readsByDoor|recentErrors|savedRow|machine)'
M='(append|insert|remove|removeAll|removeFirst|removeValue|formUnion|subtract|add|start|truncate|addInterest|release|finish|advance|rebase|prioritize|fill|updateValue)'
grep -nE "$V\.$F(\.[a-zA-Z]+)*(\[[^]]*\])? *(=[^=]|\+=|-=)|$V\.$F(\.[a-zA-Z]+)*\.$M *(\(|\{)|&$V\.$F\b|\.machine\.(content|reads|state)\b|\.machine\.(store|changeFacts) *\(" "$@" && exit 1
exit 0
