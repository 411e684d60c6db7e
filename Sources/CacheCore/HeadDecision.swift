/// What a transfer's response head means for its entry: a pure decision table, used only by
/// `EntryStateMachine.headArrived` (which adds the side rules and `EntrySink` carries out).
///
/// Two questions, in order. Which version is this? (the first answer for a URL makes the entry;
/// an answer that `differs` starts a new generation; else it confirms the entry.) And what will
/// the body be? (a 206 must start where it was asked to; a 200 from byte 0 where a range was
/// asked, or from an origin without ranges, is the whole file: kept whole, by one transfer at a
/// time.)
struct HeadDecision: Equatable {
    enum Version: Equatable {
        /// The first good answer for this URL: the entry becomes real.
        case adoptFirst
        /// Same version as the entry: refresh its validation time.
        case confirm
        /// Another version, whose bytes this transfer cannot deliver from where it was asked
        /// (a 206, or a resumable range): stop it, plan the reads again for the new version.
        case newVersionRefetch
        /// Another version, sent whole from byte 0: this transfer fills the new generation.
        case newVersionFromStart
    }

    enum Body: Equatable {
        /// A 206 that starts where it was asked to.
        case partial
        /// A 206 that starts elsewhere: refuse it.
        case wrongStart(String)
        /// The whole file from byte 0; `ignoredRange` when a range had been asked for.
        case whole(ignoredRange: Bool)
        /// The whole file, but another transfer is already streaming it: give way to that one.
        case giveWay
        /// Nothing to decide: the transfer stops anyway.
        case none
    }

    var version: Version
    var body: Body

    /// Whether the transfer goes on after this head.
    var proceeds: Bool {
        switch (version, body) {
        case (.newVersionRefetch, _), (_, .wrongStart), (_, .giveWay): false
        default: true
        }
    }

    /// - Parameters:
    ///   - isNew: the entry has no index row yet (probing).
    ///   - differs: the head describes another version than the entry's (only for known entries).
    ///   - position: the first byte this transfer asked for.
    ///   - wholeBodyRunning: another transfer of this version already streams the whole file.
    static func decide(isNew: Bool, differs: Bool, status: Int, bodyStart: Int64, acceptsRanges: Bool,
                       position: Int64, wholeBodyRunning: Bool) -> HeadDecision {
        let version: Version
        if isNew {
            version = .adoptFirst
        } else if differs {
            if status == 206 || (position > 0 && acceptsRanges) {
                return HeadDecision(version: .newVersionRefetch, body: .none)
            }
            version = .newVersionFromStart
        } else {
            version = .confirm
        }
        if status == 206 {
            guard bodyStart == position else {
                return HeadDecision(version: version, body: .wrongStart("asked for bytes from \(position), got \(bodyStart)"))
            }
            return HeadDecision(version: version, body: .partial)
        }
        if position != 0 || !acceptsRanges {
            // Another whole-body transfer of the old version is stopped by the new generation.
            let giveWay = wholeBodyRunning && version != .newVersionFromStart
            return HeadDecision(version: version, body: giveWay ? .giveWay : .whole(ignoredRange: position != 0))
        }
        // A 200 to a range from byte 0 of an origin that serves ranges: the bytes wanted come
        // first; the transfer stops at its end as any other.
        return HeadDecision(version: version, body: .partial)
    }
}
