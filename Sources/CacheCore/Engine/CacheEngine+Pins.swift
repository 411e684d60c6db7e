import Foundation

/// Pinned ranges (`preload --pin`): bytes eviction leaves alone, so the start and end of a
/// library's files (where players and scanners read first) stay cached under any pressure.
/// Counted in what they keep (whole slices, up to the file's end: `PinTable`), and bounded by
/// `pinLimit` (half the cap), so eviction always has room and the cap holds.
extension CacheEngine {
    /// The most bytes that may be pinned at all: half the cap.
    public var pinLimit: Int64 { configuration.halfCapacity }

    /// Bytes the pins keep over every file: the slices they overlap (cached or not yet).
    public var pinnedBytes: Int64 { core.userPins.totalBytes }

    /// The pinned ranges of `url`'s file.
    public func pinnedRanges(url: String) -> [Range<Int64>] {
        (try? key(for: url)).map { core.userPins.ranges($0).ranges } ?? []
    }

    /// The bytes the pins of `url`'s file keep (whole slices).
    public func pinnedBytes(url: String) -> Int64 {
        (try? key(for: url)).map { core.userPins.heldBytes($0) } ?? 0
    }

    /// Adds `ranges` to the pinned ranges of `url`'s file, unless what the pins keep would pass
    /// `limit` (itself at most `pinLimit`). Committed to the index before it returns: pins
    /// survive a restart. Returns the bytes the pins keep more than before (whole slices: one
    /// pinned byte keeps its slice).
    @discardableResult
    public func pin(url: String, ranges: [Range<Int64>], limit: Int64) throws -> Int64 {
        let key = try key(for: url)
        let limit = min(limit, pinLimit)
        let pins = core.userPins
        pins.updates.lock()
        defer { pins.updates.unlock() }
        var set = pins.ranges(key)
        let before = set.count
        for r in ranges where r.lowerBound < r.upperBound { set.insert(r) }
        guard set.count > before else { return 0 }
        let length = core.cachedInfo(url: url)?.length
        let pinned = pins.totalBytes
        let total = pins.totalIf(key, set, length: length)
        if total > limit {
            throw PinRefusal(url: url, adding: total - pinned, pinned: pinned, limit: limit, hardLimit: pinLimit,
                             sliceSize: configuration.sliceSize)
        }
        do { try core.store.setPins(key: key.string, set.ranges) } catch {
            throw CacheError.storage(path: configuration.directory + "/index.sqlite", message: "cannot record the pin: \(error)")
        }
        pins.set(key, set, length: length)
        return total - pinned
    }

    /// Unpins every range of `url`'s file; returns the bytes unpinned (0: none were).
    @discardableResult
    public func unpin(url: String) throws -> Int64 {
        try unpin(key: try key(for: url))
    }

    /// The same, for the entry `key` names.
    func unpin(key: CacheKey) throws -> Int64 {
        core.userPins.updates.lock()
        defer { core.userPins.updates.unlock() }
        guard !core.userPins.ranges(key).isEmpty else { return 0 }
        let pinned = core.userPins.heldBytes(key)
        try unpinHoldingUpdates(key)
        return pinned
    }

    /// Unpins every file (`clear`).
    func unpinAll() throws {
        core.userPins.updates.lock()
        defer { core.userPins.updates.unlock() }
        for key in core.userPins.all().keys { try unpinHoldingUpdates(key) }
    }

    /// Drops `key`'s pins from the index, then from the table (call holding `userPins.updates`).
    private func unpinHoldingUpdates(_ key: CacheKey) throws {
        do { try core.store.setPins(key: key.string, []) } catch {
            throw CacheError.storage(path: configuration.directory + "/index.sqlite", message: "cannot record the unpin: \(error)")
        }
        core.userPins.set(key, RangeSet())
    }
}

/// A pin that would pass the pin limit: what was asked, what is pinned, and the way out.
public struct PinRefusal: Error, Equatable, CustomStringConvertible {
    public var url: String
    public var adding: Int64
    public var pinned: Int64
    public var limit: Int64
    public var hardLimit: Int64
    /// Pins keep whole slices of this many bytes.
    public var sliceSize: Int64 = 0

    public var description: String {
        "cannot pin \(adding) more bytes of \(DisplayURL.redacted(url)): \(pinned) bytes are pinned already and the limit is \(limit) bytes (--pin-max; at most half the cache cap, \(hardLimit) bytes)"
            + (sliceSize > 0 ? "; a pin keeps whole slices of \(sliceSize) bytes (or the file up to its end)" : "")
            + "; unpin with 'httpcachefs cache unpin URL' or raise the cap"
    }
}
