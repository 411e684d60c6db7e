import CoreTypes
import Foundation

/// A transfer's response head arrived: which version it is, what its body will be, and whether
/// the opens waiting can be answered. The table is `HeadDecision`'s; the side rules around it
/// (the count of ignored ranges, a new probe for a new version of unknown length, which
/// transfers answer opens) are here.
extension EntryStateMachine {
    package enum HeadAction {
        /// The transfer is not wanted any more (the entry left its shard or moved to another
        /// version, or the fetch was taken off the table): stop it, change nothing.
        case stop
        /// Carry out `decision`'s version step, then its body step, then answer `opens` with
        /// the entry's info (as the version step left it); start `reprobe` (a fetch id, from
        /// byte 0 to the end, pinned) for a new version whose length the head did not give.
        case apply(HeadDecision, answer: [Open], reprobe: Int?)
        /// The answer is not a version of this file (`HeadDecision.Version.failedRevalidation`):
        /// stop the transfer, keep the entry as it is, and answer `answer` with the cached copy
        /// if `staleCopy` (its length is known), else with the failure.
        case failedRevalidation(String, answer: [Open], staleCopy: Bool)
    }

    /// - Parameters:
    ///   - fetch: the transfer's fetch id.
    ///   - current: the transfer is still on the entry's in-flight table, for the entry's version.
    ///   - head: what the origin answered.
    ///   - differs: the head describes another version than the entry's (as `RemoteVersion` says).
    ///   - position: the first byte the transfer asked for.
    ///   - lengthKnown: the entry's length was known before this head.
    ///   - wholeBodyRunning: another transfer of this version already streams the whole file.
    ///   - provenance: what a 200 shows about where it came from (`HeadDecision.Provenance`).
    ///   - makeFetchID: a new fetch id, taken only when a new probe starts.
    package mutating func headArrived(fetch: Int, current: Bool, head: ResponseHead, differs: Bool, position: Int64,
                              lengthKnown: Bool, wholeBodyRunning: Bool,
                              provenance: HeadDecision.Provenance = HeadDecision.Provenance(),
                              makeFetchID: () -> Int) -> HeadAction {
        guard current else { return .stop }
        let isNew: Bool
        var f: Facts
        switch state {
        case .removed: return .stop
        case let .probing(facts): isNew = true; f = facts
        case let .live(facts): isNew = false; f = facts
        }
        let decision = HeadDecision.decide(isNew: isNew, differs: !isNew && differs, status: head.status,
                                           bodyStart: head.bodyStart, acceptsRanges: head.acceptsRanges,
                                           position: position, wholeBodyRunning: wholeBodyRunning,
                                           provenance: provenance)
        let isProbe = f.probes.contains(fetch)
        // Every answer that gets this far makes (or keeps) the entry live: the first one adopts it.
        defer { store(f, live: true) }
        switch decision.version {
        case let .failedRevalidation(why):
            // The entry stays as it was (not validated); a probe's opens get the cached copy.
            return .failedRevalidation(why, answer: isProbe ? Self.takeOpens(&f) : [], staleCopy: lengthKnown)
        case .newVersionRefetch:
            f.ignoredRanges = 0
            guard isProbe else { return .apply(decision, answer: [], reprobe: nil) }
            if head.totalLength != nil { return .apply(decision, answer: Self.takeOpens(&f), reprobe: nil) }
            // The new version's length is unknown: probe it from the start.
            let id = makeFetchID()
            f.probes.insert(id)
            return .apply(decision, answer: [], reprobe: id)
        case .newVersionFromStart:
            f.ignoredRanges = 0
        case .adoptFirst, .confirm:
            break
        }
        switch decision.body {
        case .partial:
            if head.status == 206 { f.ignoredRanges = 0 }
        case .wrongStart, .giveWay:
            return .apply(decision, answer: [], reprobe: nil)
        case let .whole(ignoredRange):
            if ignoredRange { f.ignoredRanges += 1 }
        case .none:
            break
        }
        // A new version's length is the head's; the same version keeps a length it knew.
        let lengthKnownNow = decision.version == .newVersionFromStart ? head.totalLength != nil
            : lengthKnown || head.totalLength != nil
        guard isProbe, lengthKnownNow else { return .apply(decision, answer: [], reprobe: nil) }
        return .apply(decision, answer: Self.takeOpens(&f), reprobe: nil)
    }
}

extension EntryStateMachine {
    /// The entry's info once `head` confirmed its version (`HeadDecision.Version.confirm`) at
    /// `now`: validated now, at the URL the answer came from; serving ranges if it was a 206; and
    /// of the head's length if it knew none (a length it knew stays).
    package static func confirmed(_ info: EntryInfo, by head: ResponseHead, at now: Date) -> EntryInfo {
        var info = info
        info.validatedAt = now
        info.finalURL = head.finalURL
        if head.status == 206 { info.acceptsRanges = true }
        if info.length == nil, let l = head.totalLength { info.length = l }
        return info
    }

    /// The entry's info once the head's body step is done: an origin that sent the whole body
    /// (`whole`), or whose whole body another transfer is streaming (`giveWay`), is taken to
    /// serve no ranges; every other body changes nothing.
    package static func info(_ info: EntryInfo, after body: HeadDecision.Body) -> EntryInfo {
        switch body {
        case .whole, .giveWay:
            var info = info
            info.acceptsRanges = false
            return info
        case .partial, .wrongStart, .none:
            return info
        }
    }
}

extension EntryStateMachine.HeadAction: Equatable where Open: Equatable {}
