import Foundation

/// Pinned ranges (`preload --pin`): bytes eviction leaves alone, so the start and end of a
/// library's files (where players and scanners read first) stay cached under any pressure.
/// The total is bounded: at most `pinLimit` (half the cap), so eviction always has room.
extension CacheEngine {
    /// The most bytes that may be pinned at all: half the cap.
    public var pinLimit: Int64 { configuration.capacity / 2 }

    /// Bytes pinned over every file (the ranges' lengths, cached or not yet).
    public var pinnedBytes: Int64 { core.userPins.totalBytes }

    /// The pinned ranges of `url`'s file.
    public func pinnedRanges(url: String) -> [Range<Int64>] {
        (try? key(for: url)).map { core.userPins.ranges($0).ranges } ?? []
    }

    /// Adds `ranges` to the pinned ranges of `url`'s file, unless the total would pass `limit`
    /// (itself at most `pinLimit`). Committed to the index before it returns: pins survive a
    /// restart. Returns the bytes newly pinned.
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
        let added = set.count - before
        guard added > 0 else { return 0 }
        let total = pins.totalBytes + added
        if total > limit {
            throw PinRefusal(url: url, adding: added, pinned: pins.totalBytes, limit: limit, hardLimit: pinLimit)
        }
        do { try core.index.setPins(key: key.string, set.ranges) } catch {
            throw CacheError.storage(path: configuration.directory + "/index.sqlite", message: "cannot record the pin: \(error)")
        }
        pins.set(key, set)
        return added
    }

    /// Unpins every range of `url`'s file; returns the bytes unpinned (0: none were).
    @discardableResult
    public func unpin(url: String) throws -> Int64 {
        let key = try key(for: url)
        core.userPins.updates.lock()
        defer { core.userPins.updates.unlock() }
        let pinned = core.userPins.ranges(key).count
        guard pinned > 0 else { return 0 }
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
        do { try core.index.setPins(key: key.string, []) } catch {
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

    public var description: String {
        "cannot pin \(adding) more bytes of \(DisplayURL.redacted(url)): \(pinned) bytes are pinned already and the limit is \(limit) bytes (--pin-max; at most half the cache cap, \(hardLimit) bytes); unpin with 'httpcachefs cache unpin URL' or raise the cap"
    }
}
