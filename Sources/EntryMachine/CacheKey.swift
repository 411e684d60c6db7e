import CoreTypes

/// The identity of a cache entry: its URL made canonical, as CacheCore's `KeyRules` (`Keys/`)
/// make it. Here so that the entry machine and its info can name it.
public struct CacheKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let string: String
    public init(rawValue: String) { self.string = rawValue }
    public var description: String { string }
    public static func < (a: CacheKey, b: CacheKey) -> Bool { a.string < b.string }

    /// A stable 64-bit FNV-1a hash, used to pick a shard (Swift's Hasher is seeded per process).
    public var stableHash: UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in string.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }
}
