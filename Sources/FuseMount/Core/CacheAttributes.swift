import CacheCore
import Foundation
import Glibc

/// Cache state where files live: extended attributes under `user.httpcachefs.`, read with
/// `getfattr`, and a pin set with `setfattr`. Pure: names to answers and errno, no I/O.
///
/// - `url`: the file's URL (credentials taken out);
/// - `cached`: bytes cached and the size, `CACHED/SIZE`;
/// - `ranges`: the cached byte ranges, inclusive as in HTTP (`0-262143,1048576-2097151`);
/// - `pinned`: `1` when ranges of the file are pinned (kept from eviction), else `0`;
/// - `validator`: what the cache revalidates with: `etag "…"`, else `last-modified …`, else none;
/// - `pin`: `setfattr -n user.httpcachefs.pin -v 1` pins the file's head and tail (and warms
///   them), `-v 0` or `setfattr -x` unpins.
///
/// Errors: a name of ours that does not exist is ENODATA (as `getfattr` expects); other
/// namespaces (`security.`, `trusted.`, `system.`, other `user.` names) are ENOTSUP, since the
/// mount keeps none; setting a name of ours other than `pin`, or anything on a directory, is
/// EPERM; a `pin` value other than 1/0 is EINVAL.
enum CacheAttributes {
    static let prefix = "user.httpcachefs."

    enum Readable: String, CaseIterable {
        case url, cached, ranges, pinned, validator
    }

    enum Name: Equatable {
        case readable(Readable)
        case pin
        /// Under our prefix, but not a name we have.
        case unknownOurs
        /// Another namespace or another program's name.
        case other
    }

    static func name(_ full: String) -> Name {
        guard full.hasPrefix(prefix) else { return .other }
        let rest = String(full.dropFirst(prefix.count))
        if rest == "pin" { return .pin }
        return Readable(rawValue: rest).map(Name.readable) ?? .unknownOurs
    }

    /// What `listxattr` shows on a file: every readable name, NUL-terminated.
    static var listing: [UInt8] {
        Readable.allCases.flatMap { Array((prefix + $0.rawValue).utf8) + [0] }
    }

    /// The value of `attribute` for the file at `url` of size `size` (nil: not known yet), from
    /// the cache's `status` (nil: nothing cached) and its pinned ranges.
    static func value(_ attribute: Readable, url: String, size: Int64?, status: EntryStatus?,
                      pinned: [Range<Int64>]) -> String {
        switch attribute {
        case .url:
            return DisplayURL.redacted(url)
        case .cached:
            let length = status?.info.length ?? size
            return "\(status?.cachedBytes ?? 0)/\(length.map(String.init) ?? "unknown")"
        case .ranges:
            return (status?.cachedRanges ?? []).map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ",")
        case .pinned:
            return pinned.isEmpty ? "0" : "1"
        case .validator:
            if let etag = status?.info.etag { return "etag \(etag)" }
            if let date = status?.info.lastModified { return "last-modified \(date)" }
            return "none"
        }
    }

    /// What a `pin` value asks: true pin, false unpin; nil for a value that is neither.
    static func pinValue(_ bytes: [UInt8]) -> Bool? {
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        switch text {
        case "1", "yes", "true", "on": return true
        case "0", "no", "false", "off": return false
        default: return nil
        }
    }

    /// What `setfattr -n user.httpcachefs.pin -v 1` pins: where players and scanners read
    /// first, the start of the file and its end (an MP4's index, an MKV's cues).
    static let pinHead: Int64 = 2 << 20
    static let pinTail: Int64 = 4 << 20

    static func pinRanges(size: Int64) -> [Range<Int64>] {
        guard size > 0 else { return [] }
        let head = 0..<min(size, pinHead)
        let tail = max(0, size - pinTail)..<size
        return head.upperBound >= tail.lowerBound ? [0..<size] : [head, tail]
    }

    /// A reply of `value` to a caller that offered `size` bytes: the length when it asked for
    /// it (size 0), ERANGE when it does not fit.
    enum Reply: Equatable {
        case size(Int)
        case bytes([UInt8])
        case error(Int32)
    }

    static func reply(_ value: [UInt8], size: Int) -> Reply {
        if size == 0 { return .size(value.count) }
        return value.count > size ? .error(ERANGE) : .bytes(value)
    }
}

extension Result where Success == Void, Failure == FSErrno {
    /// For `fuse_reply_err`: 0 on success.
    var failureCode: Int32 {
        if case let .failure(e) = self { return e.code }
        return 0
    }
}
