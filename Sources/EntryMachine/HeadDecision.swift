import CoreTypes

/// What a transfer's response head means for its entry: a pure decision table, used only by
/// `EntryStateMachine.headArrived` (which adds the side rules and `EntrySink` carries out).
///
/// Two questions, in order. Which version is this? (the first answer for a URL makes the entry;
/// an answer that `differs` starts a new generation, unless it is a 200 that does not look like a
/// version of this file at all (`Provenance`): a failed revalidation; else it confirms the entry.) And what will
/// the body be? (a 206 must start where it was asked to; a 200 from byte 0 where a range was
/// asked, or from an origin without ranges, is the whole file: kept whole, by one transfer at a
/// time.)
package struct HeadDecision: Equatable {
    package enum Version: Equatable {
        /// The first good answer for this URL: the entry becomes real.
        case adoptFirst
        /// Same version as the entry: refresh its validation time.
        case confirm
        /// Another version, whose bytes this transfer cannot deliver from where it was asked
        /// (a 206, or a resumable range): stop it, plan the reads again for the new version.
        case newVersionRefetch
        /// Another version, sent whole from byte 0: this transfer fills the new generation.
        case newVersionFromStart
        /// Not a version of this file at all (a captive portal's login page, a proxy's error
        /// page): a failed revalidation. Stop the transfer, keep the cached bytes, serve them as
        /// for an origin that is down.
        case failedRevalidation(String)
    }

    /// What a 200 for a known entry shows about where it came from. An answer that names no
    /// version (no ETag, no Last-Modified) and either has another media type than the entry, or
    /// is a whole body to a range request of an origin that served ranges for this version, is
    /// not believed to be a new version: a real origin whose file changed names the new version
    /// (If-Range's 200 comes with the validators that did not match).
    package struct Provenance: Equatable {
        /// The answer carries an ETag or a Last-Modified.
        package var namesVersion = true
        /// Both the entry and the answer have a media type, and they differ.
        package var otherMediaType = false
        /// The request asked for a range (it had a `Range` header).
        package var rangeAsked = false
        /// The origin served ranges for the entry's version.
        package var rangesServed = false

        /// Why a 200 with these facts is not a version of the entry, or nil.
        package var distrust: String? {
            guard !namesVersion else { return nil }
            if otherMediaType { return "a 200 of another media type, with no ETag or Last-Modified" }
            if rangeAsked && rangesServed {
                return "a 200 to a range request of an origin that serves ranges, with no ETag or Last-Modified"
            }
            return nil
        }

        package init(namesVersion: Bool = true, otherMediaType: Bool = false, rangeAsked: Bool = false, rangesServed: Bool = false) {
            self.namesVersion = namesVersion
            self.otherMediaType = otherMediaType
            self.rangeAsked = rangeAsked
            self.rangesServed = rangesServed
        }
    }

    package enum Body: Equatable {
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

    package var version: Version
    package var body: Body

    /// Whether the transfer goes on after this head.
    package var proceeds: Bool {
        switch (version, body) {
        case (.newVersionRefetch, _), (.failedRevalidation, _), (_, .wrongStart), (_, .giveWay): false
        default: true
        }
    }

    /// - Parameters:
    ///   - isNew: the entry has no index row yet (probing).
    ///   - differs: the head describes another version than the entry's (only for known entries).
    ///   - position: the first byte this transfer asked for.
    ///   - wholeBodyRunning: another transfer of this version already streams the whole file.
    ///   - provenance: what a 200 shows about where it came from (only for known entries).
    package static func decide(isNew: Bool, differs: Bool, status: Int, bodyStart: Int64, acceptsRanges: Bool,
                       position: Int64, wholeBodyRunning: Bool, provenance: Provenance = Provenance()) -> HeadDecision {
        // A body that starts past byte 0 is the range asked for: a 206, or a 200 whose leading
        // bytes the fetcher dropped (`TransferState.usableLead`). Never "the whole file from 0".
        let partial = status == 206 || bodyStart > 0
        let version: Version
        if isNew {
            version = .adoptFirst
        } else if differs, status == 200, let why = provenance.distrust {
            return HeadDecision(version: .failedRevalidation(why), body: .none)
        } else if differs {
            if partial || (position > 0 && acceptsRanges) {
                return HeadDecision(version: .newVersionRefetch, body: .none)
            }
            version = .newVersionFromStart
        } else {
            version = .confirm
        }
        if partial {
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
