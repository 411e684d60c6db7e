import CoreTypes

/// One entry's life as a pure state machine: events in, actions out.
///
/// Design note.
///
/// *What it owns.* The facts about an entry that decide what happens next and that nothing else
/// needs: where it is in its life (`probing`: no index row yet; `live`; `removed`: it left its
/// shard), the opens waiting for a metadata probe's answer, which running transfers are such
/// probes, and how many whole bodies in a row the origin sent to ranged requests. Each event
/// returns what the engine must do; the machine changes nothing else itself.
///
/// It also holds the rest of the entry: its reader side (`reads`: `EntryStateMachine+Read`) and
/// its version and bytes (`content`: `EntryInfo`, coverage, pending bytes, the in-flight table,
/// slices, pins, errors; `EntryStateMachine+Content`). Nothing outside this module writes them,
/// and the compiler says so: `state`, `reads` and `content` have setters inside the module only
/// (`package private(set)`, `package internal(set)`), so CacheCore reads them but a write, a
/// mutating call or an `inout` use of any part of them does not build; only the events
/// (`package mutating func`) change them. Some events' rules still take facts as parameters
/// (`differs`, `lengthKnown`, `current`, the in-flight table), so that their tables can test them
/// alone; the events the engine calls pass the machine's own.
///
/// *Who calls it, under which lock.* It is CacheCore's `EntryState.machine`, guarded like all of
/// `EntryState` by the entry's shard lock: `EntryOpener.open` (`openRequested`), `EntrySink`
/// (`headArrived` when a transfer's head arrives, `transferFinished` when it ends, failed or
/// not), and the removals (`removed`: `cache rm`/`clear`, a failed first probe) call it with the
/// lock held, and carry out the returned actions under the same lock, except starting and
/// cancelling transfers and running completions, which happen after it is released. It never
/// locks, blocks, reads a clock or holds memory in the budget: ids for new probes come from the
/// caller (`makeFetchID`), times as parameters, and memory a waiting read is to hold comes back
/// as an action (`ReadAction.holdPending`, `Written.hold`) that the engine carries out.
///
/// *Events.* `openRequested`, `headArrived`, `bytesArrived`, `writeCompleted`, `transferFinished`,
/// `removed` (the arrival side's rules: `EntryStateMachine+Arrival`). A write done and a
/// transfer's end are one event each as the engine reports them (`writeCompleted(_:written:…)`,
/// `transferFinished(_:generation:…)`), which apply the finer rules their tables test. A reader closing is not one:
/// it changes the reads waiting and the interest in transfers, which `InFlightTable` decides. What
/// a head means for the version and the body is `HeadDecision`'s table, which only this machine uses.
///
/// *Content.* What happens to the version and its bytes is recorded by its own events
/// (`EntryStateMachine+Content`): `loaded`, `sliceLoaded` (the start), `lengthLimitAsked`,
/// `probeStarted`, `headAdopted`, `indexed`, `versionConfirmed`, `bodyDecided`,
/// `generationStarted` (a new version: what to give back and cancel), `validationForgotten`,
/// `lengthLearned`, the transfer steps (`transferStarted`, `transferAdvanced`, `transferRebased`,
/// `transferEnded`, `readAheadArrived`, `pendingAdded`, `pendingWritten`, `recordWritten`),
/// the slices' (`sliceDropped`, `slicesTouched`, `slicesScanned`, `slicesPinned`, `slicesUnpinned`),
/// `wholeFileRead`, `readStatsTaken`, `rowToSave`, `errorNoted` and `stopped`.
///
/// *Marks.* It also keeps the entry's eviction marks (`evictionOffered`, `evictionCommitted`:
/// `EntryStateMachine+Eviction`) and verify marks (`loadedUnchecked`, `verifyAheadRequested`,
/// `verifyStarted`, `verifyFinished`, `uncheckedSlicesForgotten`: `EntryStateMachine+Verify`);
/// `EntryState.evicting`, `unverified` and `verifyQueued` read them.
///
/// `Open` is what an open leaves to be answered (the engine's completion; an `Int` in tests): the
/// machine keeps the waiting ones and hands them back in the action that answers them.
///
/// Map of this module (`EntryMachine`, depending on CoreTypes only): one entry's life and the
/// pure rules and values it decides with.
/// - `EntryStateMachine.swift` (this file): the machine's states, opens and probes.
/// - `EntryStateMachine+Open/+Head/+Arrival/+Finish.swift`: an open, a response head, bytes
///   arriving and written, a transfer's end.
/// - `EntryStateMachine+Read/+Waiters/+Tick.swift`: reads asked, waiting, woken, timed out.
/// - `EntryStateMachine+Eviction/+Verify.swift`: which offered slice may leave; unchecked slices.
/// - `EntryStateMachine+Content.swift`: the version and its bytes (`EntryContent`) and the
///   events that record what happens to them.
/// - `Waiter.swift`: a waiting read as the machine keeps it; its reply is the engine's.
/// - `HeadDecision.swift`: the table of what a response head means (version, body).
/// - `InFlightTable.swift`: the entry's fetches and who still wants them.
/// - `PendingBytes.swift`: bytes arrived and not yet written, readable meanwhile (`ChunkMemory`).
/// - `UnreadFetched.swift`: fetched bytes not read yet, by fetcher; those that left unread.
/// - `OpenDeadlines.swift`: opens that time out, and endless bodies nobody opens any more.
/// - `RemoteVersion.swift`: did the remote file change (validators).
/// - `FileLength.swift`: lengths from outside, and arithmetic that cannot trap on them.
/// - `ReadPlanner.swift`: range to plan (disk, pending, wait, fetch).
/// - `ReaderClass.swift`, `ReaderPace.swift`, `ReaderTempo.swift`, `EarnedReadAhead.swift`,
///   `ReaderProgress.swift`, `AccessPattern.swift`: who reads, how it consumes, what read-ahead
///   it earned, what its reads so far show.
/// - `FetchPriority.swift`: how urgent a transfer is (a waiting read first).
/// - `EntryInfo.swift`, `EntryRow.swift`, `CacheKey.swift`, `CacheError.swift`,
///   `ResponseHead.swift` (with `FetchError`), `ReadDoor.swift`: the values it names: one entry as
///   the front doors see it, its index row, its key, the errors, a response head, a read's door.
/// Neighbours: pure, calls nothing with effects, imports only CoreTypes (`RangeSet`). CacheCore
/// re-exports it; its `Engine/`, `Read/`, `Fetch/`, `Eviction/` and `Maintenance/` call the
/// machine under the shard lock and carry out what it returns (`Entry/EntryState.swift` holds it).
package struct EntryStateMachine<Open> {
    package enum State {
        /// No index row yet: the first good answer makes one (`id` -1 until then).
        case probing(Facts)
        /// Has an index row and is in its shard.
        case live(Facts)
        /// Left its shard (`cache rm`, `clear`, a live playlist refresh, a failed first probe):
        /// nothing happens to it any more.
        case removed
    }

    /// What a probing or live entry knows.
    package struct Facts {
        /// Opens waiting for a probe's answer; nil when none waits (the next open starts a probe).
        package var opens: [Open]?
        /// Fetch ids of the metadata probes still running. What one of them learns answers the
        /// opens waiting: another transfer knows nothing about whether its version is current.
        package var probes: Set<Int> = []
        /// Answers of the whole body to a ranged request in a row, with no 206 between (for the
        /// log); a new version starts again at 0.
        package var ignoredRanges = 0
        /// Slices whose rows an eviction is deleting (`EntryStateMachine+Eviction`).
        package var evicting: Set<Int64> = []
        /// Slices not checked since this start, and those queued for a check
        /// (`EntryStateMachine+Verify`).
        package var unverified: Set<Int64> = []
        package var verifyQueued: Set<Int64> = []
    }

    package private(set) var state: State
    /// The reader side: reads waiting, reads that timed out lately, read-ahead not read yet, the
    /// read counts (`EntryStateMachine+Read`).
    package internal(set) var reads = EntryReads()
    /// The version and its bytes: row id, info, coverage, pending bytes, transfers, slices, pins,
    /// errors (`EntryStateMachine+Content`).
    package internal(set) var content: EntryContent

    /// An entry read from the index starts `live`; one made for a new URL starts `probing`.
    init(persisted: Bool, content: EntryContent = EntryContent()) {
        state = persisted ? .live(Facts()) : .probing(Facts())
        self.content = content
    }

    /// An entry of index row `id` (-1: none yet, `probing`), at `info`, last read at `lastAccess`.
    package init(id: Int64, info: EntryInfo, lastAccess: Double) {
        self.init(persisted: id >= 0, content: EntryContent(id: id, info: info))
        reads.lastAccess = lastAccess
    }

    init(state: State, content: EntryContent = EntryContent()) {
        self.state = state
        self.content = content
    }

    package var isLive: Bool { if case .live = state { true } else { false } }
    package var isProbing: Bool { if case .probing = state { true } else { false } }
    package var isRemoved: Bool { if case .removed = state { true } else { false } }

    /// Whether `fetch` is a metadata probe (the open-time check of the version, which a fetch
    /// through a cache tier must not replace: it goes to the origin itself).
    package func isProbe(_ fetch: Int) -> Bool {
        switch state {
        case let .probing(f), let .live(f): f.probes.contains(fetch)
        case .removed: false
        }
    }

    package var ignoredRanges: Int {
        switch state {
        case let .probing(f), let .live(f): f.ignoredRanges
        case .removed: 0
        }
    }

    /// Replaces the facts of a probing or live entry, keeping which of the two it is.
    mutating func store(_ facts: Facts, live: Bool) {
        state = live ? .live(facts) : .probing(facts)
    }

    /// Changes the facts of a probing or live entry in place, keeping which of the two it is
    /// (the state lets go of them meanwhile, so a set in them is changed, not copied); nil for
    /// a removed entry.
    @discardableResult
    mutating func changeFacts<T>(_ body: (inout Facts) -> T) -> T? {
        let live: Bool
        var f: Facts
        switch state {
        case let .probing(facts): (live, f) = (false, facts)
        case let .live(facts): (live, f) = (true, facts)
        case .removed: return nil
        }
        state = .removed
        defer { store(f, live: live) }
        return body(&f)
    }

    // MARK: Open requested

    package enum OpenAction: Equatable {
        /// The entry is fresh: answer the open with its info now.
        case answer
        /// A probe is under way: the open waits for its answer.
        case wait
        /// Start a metadata probe with this fetch id (a small ranged GET from byte 0); the open
        /// waits for it.
        case startProbe(fetchID: Int)
        /// The entry left its shard: the open fails (cancelled).
        case cancel
    }

    /// An open of the entry's URL.
    /// - Parameters:
    ///   - open: what to answer later, kept when it must wait.
    ///   - fresh: the caller's judgement that the entry's version was validated recently enough
    ///     (and its length is known); only a live entry can be fresh.
    ///   - makeFetchID: a new fetch id, taken only when a probe starts.
    package mutating func openRequested(_ open: Open, fresh: Bool, makeFetchID: () -> Int) -> OpenAction {
        switch state {
        case .removed:
            return .cancel
        case .live where fresh:
            return .answer
        case var .probing(f), var .live(f):
            let live = isLive
            if f.opens != nil {
                f.opens!.append(open)
                store(f, live: live)
                return .wait
            }
            let id = makeFetchID()
            f.opens = [open]
            f.probes.insert(id)
            store(f, live: live)
            return .startProbe(fetchID: id)
        }
    }

    // MARK: Removed

    package enum RemoveAction {
        /// It just left: fail the opens still waiting (cancelled), and give its bytes back.
        case leave(cancelOpens: [Open])
        /// It had left already: nothing to do.
        case none
    }

    /// The entry leaves its shard: it holds no pins and no pending bytes from now on.
    package mutating func removed() -> RemoveAction {
        content.pins = [:]
        content.pending.removeAll()
        switch state {
        case .removed:
            return .none
        case let .probing(f), let .live(f):
            state = .removed
            return .leave(cancelOpens: f.opens ?? [])
        }
    }

    /// Hands back the opens waiting (none are left), for an action that answers them.
    static func takeOpens(_ f: inout Facts) -> [Open] {
        defer { f.opens = nil }
        return f.opens ?? []
    }
}

extension EntryStateMachine.State: Equatable where Open: Equatable {}
extension EntryStateMachine.Facts: Equatable where Open: Equatable {}
extension EntryStateMachine.RemoveAction: Equatable where Open: Equatable {}
