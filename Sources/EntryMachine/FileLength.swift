import CoreTypes

/// The largest file httpcachefs represents, and arithmetic that cannot trap on hostile numbers.
///
/// Lengths, offsets and counts arrive from outside: an origin's Content-Length and Content-Range,
/// a directory listing, a client's Range header, the kernel's read offset. Swift traps on
/// Int64 overflow, and a trap would take the whole daemon down for one bad file, so:
/// - every length taken from the network or a listing must pass `FileLength.isRepresentable`;
///   a file claiming more fails on its own (EIO in the mount, 502 in the proxy), and
/// - offsets from clients and the kernel are clamped with `addingClamped` before use.
public enum FileLength {
    /// 2^62 bytes (4 EiB). With every length and offset at most this, the sum of any two of
    /// them (an offset plus a read size, a request end plus read-ahead, a range start plus a
    /// Content-Length) stays below Int64.max = 2^63 - 1, so the cache's arithmetic on them
    /// cannot overflow. No real file comes near: Linux's own limit is 2^63 - 1 (off_t), XFS
    /// and btrfs stop at 8 EiB, ext4 at 16 TiB.
    public static let limit: Int64 = 1 << 62

    /// Whether `length` is a size this cache can hold: 0 ... 2^62.
    public static func isRepresentable(_ length: Int64) -> Bool { length >= 0 && length <= limit }

    /// Why a claimed length (`claim` quotes it, e.g. the header) is refused, for the error it becomes.
    public static func refusal(_ claim: String) -> String {
        "\(claim): more than 2^62 bytes (4 EiB), the largest file httpcachefs handles"
    }
}

extension Int64 {
    /// `self + other`, stopping at Int64.max or Int64.min instead of trapping.
    public func addingClamped(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
