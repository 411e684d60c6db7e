import CoreTypes

/// A transfer ended, whole, cut short, failed or cancelled: what the opens waiting learn, whether
/// the end of the body is the end of the file, and whether a first probe that failed takes its
/// entry away.
extension EntryStateMachine {
    /// What the opens are answered with.
    package enum OpenAnswer: Equatable {
        /// The entry's info as it is now.
        case info
        /// The entry's info, though the origin failed (unreachable, a timeout, 5xx): a cached
        /// copy is not hidden by an origin that is down; say so in the log.
        case staleCopy(CacheError)
        /// The open fails.
        case failure(CacheError)
        /// The open fails: the answer carried no length (`badResponse`, "no length").
        case noLength
    }

    /// Opens to answer, and with what.
    package struct Answer {
        package var opens: [Open]
        package var with: OpenAnswer

        package init(opens: [Open], with: OpenAnswer) {
            self.opens = opens
            self.with = with
        }
    }

    package enum FinishAction {
        /// The entry left its shard: nothing to do.
        case none
        /// A new version was found meanwhile: answer `answer` (if any) with the entry's info, and
        /// plan the reads waiting again.
        case otherVersion(answer: Answer?)
        /// The transfer was of the entry's version. Record the end of the body as the file's
        /// length if `learnLength`; answer `answer`; note the error; wake and plan again the
        /// reads waiting (those that needed its undelivered bytes fail); then, if
        /// `removeIfUnused` (a first probe failed), take the entry out of its shard (`removed`)
        /// unless reads still wait on it or transfers still run for it.
        case settle(learnLength: Bool, answer: Answer?, removeIfUnused: Bool)
    }

    /// - Parameters:
    ///   - fetch: the transfer's fetch id.
    ///   - current: the transfer was of the entry's version (another transfer may have found a
    ///     new one meanwhile).
    ///   - reachedEOF: it ended by itself, with no error, and had no end of its own: what it
    ///     delivered runs to the end of the file.
    ///   - lengthKnown: the entry's length is known.
    ///   - cause: why it failed (nil when it did not, or was cancelled).
    mutating func transferFinished(fetch: Int, current: Bool, reachedEOF: Bool, lengthKnown: Bool,
                                   cause: CacheError?) -> FinishAction {
        var f: Facts
        let live: Bool
        switch state {
        case .removed: return .none
        case let .probing(facts): f = facts; live = false
        case let .live(facts): f = facts; live = true
        }
        defer { store(f, live: live) }
        let isProbe = f.probes.remove(fetch) != nil
        // Opens waiting belong to the newest probe: they came after every older transfer began
        // (a probe whose head answered its own opens, still streaming the whole page), and one
        // with max-age 0 (`refresh`) asks what the origin has now. An older transfer that ended
        // knows only the version it began with: answered by it, a refresh's reader would be
        // bound to the old page (served whole with no validators, all its bytes held).
        let newerProbe = f.probes.contains { $0 > fetch }
        guard current else {
            // It is what the opens get, once its length is known (else the transfer that learns
            // it answers them).
            guard isProbe, !newerProbe, lengthKnown, f.opens != nil else { return .otherVersion(answer: nil) }
            return .otherVersion(answer: Answer(opens: Self.takeOpens(&f), with: .info))
        }
        var answer: Answer?
        let learnLength = reachedEOF && !lengthKnown
        if newerProbe {
            // The newest probe answers.
        } else if learnLength, f.opens != nil {
            // Any transfer that learns the length may answer: its version is the entry's.
            answer = Answer(opens: Self.takeOpens(&f), with: .info)
        } else if isProbe, f.opens != nil {
            answer = Answer(opens: Self.takeOpens(&f),
                            with: Self.openAnswer(after: cause, live: live, lengthKnown: lengthKnown))
        }
        return .settle(learnLength: learnLength, answer: answer, removeIfUnused: !live && cause != nil)
    }

    /// A transfer's end as the engine reports it, in one event: the fetch leaves the in-flight
    /// table, `transferFinished(fetch:current:reachedEOF:lengthKnown:cause:)` decides on the
    /// entry's own facts, a length learned is recorded (`lengthLearned`), and what the transfer
    /// left undelivered comes back (`shortfall`) for the reads waiting.
    /// - Parameters:
    ///   - generation: the version the transfer was of.
    ///   - position: the first byte it did not deliver.
    ///   - clean: it ended with no error and no failure of its own (cut off, say).
    ///   - cause: why it failed (nil when it did not, or was cancelled).
    package mutating func transferFinished(_ fetch: Int, generation: Int64, position: Int64, clean: Bool,
                                           cause: CacheError?) -> Finished {
        let ended = transferEnded(fetch)
        let action = transferFinished(fetch: fetch, current: content.info.generation == generation,
                                      reachedEOF: clean && ended?.end == nil, lengthKnown: content.info.length != nil,
                                      cause: cause)
        // The origin sent no length: the end of the body is the end of the file.
        if case .settle(learnLength: true, _, _) = action { lengthLearned(position) }
        let (undelivered, endedShort) = Self.shortfall(position: position, end: ended?.end, clean: clean)
        return Finished(action: action, undelivered: undelivered, endedShort: endedShort)
    }

    /// What a transfer's end leaves the engine to do: `action`, and for the reads waiting, the
    /// bytes it did not deliver and whether it ended short on its own (`shortfall`).
    package struct Finished {
        package var action: FinishAction
        package var undelivered: Range<Int64>
        package var endedShort: Bool
    }

    /// What a transfer that ended at `position` left undelivered of its range (up to `end`, nil
    /// for none: to the end of the file), and whether it ended short: cleanly (`clean`: no error,
    /// no failure of its own) but before the end it asked for, which the reads waiting for those
    /// bytes learn (`ReadAnswers.replanWaiters`). A transfer to the end of the file never ends
    /// short: the end of its body is the end of the file.
    package static func shortfall(position: Int64, end: Int64?, clean: Bool) -> (undelivered: Range<Int64>, endedShort: Bool) {
        let end = end ?? Int64.max
        let undelivered = Swift.min(position, end)..<end
        return (undelivered, clean && !undelivered.isEmpty && end != Int64.max)
    }

    /// What opens learn when a probe ends. An origin that cannot be reached (or fails with 5xx)
    /// does not hide a file the cache already holds: the stale entry is served, with a warning.
    package static func openAnswer(after cause: CacheError?, live: Bool, lengthKnown: Bool) -> OpenAnswer {
        let usable = live && lengthKnown
        guard let cause else { return usable ? .info : .noLength }
        switch cause {
        case .unreachable, .timeout, .httpStatus, .budgetSpent:
            return usable ? .staleCopy(cause) : .failure(cause)
        default:
            return .failure(cause)
        }
    }
}

extension EntryStateMachine.Answer: Equatable where Open: Equatable {}
extension EntryStateMachine.FinishAction: Equatable where Open: Equatable {}
