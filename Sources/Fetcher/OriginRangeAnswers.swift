import CacheCore

/// Per origin (`scheme://host:port`), the last answers to ranges it was known to serve
/// (`FetchRequest.requireRange`): 206 or 200. Owned by one `CurlMultiLoop`, used on its thread
/// only (a transfer's `beginAttempt` and head), so it takes no lock; it blocks on nothing.
///
/// The question it answers: did this origin serve most of its ranges lately (`servedLately`)?
/// Then a transfer whose range was answered 200 `TransferState.maxIgnoredRanges` times in a row
/// had bad luck with a flaky CDN, not a verdict: it asks again (up to
/// `TransferState.maxIgnoredRangesServedLately` times) before it takes the whole file. Taking it
/// makes the entry one the origin serves whole (every byte from byte 0, once): a film of many
/// gigabytes for a read of 64 KiB. At one 200 in ten, two in a row come once in a hundred
/// transfers, four once in ten thousand. An origin that stopped serving ranges fills its window
/// with 200s within a few transfers and gets the verdict after two again.
///
/// Unlike the engine's table (`RangeReliabilityTable`, which keeps only origins with a 200) this
/// keeps the good answers too, for at most `maxOrigins` origins (the oldest noted is dropped).
final class OriginRangeAnswers {
    /// Served lately: at least this many 206s among the origin's last `RangeReliability.window`
    /// answers (half of them).
    static let servedLatelyAt = RangeReliability.window / 2
    static let maxOrigins = 256

    private var byOrigin: [String: RangeReliability] = [:]
    /// Origins in the order they were first noted, to drop the oldest past `maxOrigins`.
    private var order: [String] = []

    /// One answer to a required range at `origin`: a 200 (`ignored`) or a 206.
    func note(origin: String, ignored: Bool) {
        if byOrigin[origin] == nil {
            if order.count >= Self.maxOrigins { byOrigin[order.removeFirst()] = nil }
            order.append(origin)
        }
        byOrigin[origin, default: RangeReliability()].note(ignored: ignored)
    }

    func servedLately(origin: String) -> Bool {
        (byOrigin[origin]?.servedInWindow ?? 0) >= Self.servedLatelyAt
    }
}
