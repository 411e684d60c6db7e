import Foundation

/// `--scan-share`: the share of the cache's cap kept for the slices scanner-class readers read
/// (media servers' probes), as a percentage of the cap (`2%`, `0.5%`) or a size (`100M`, `1G`).
/// `0` turns the share off. Anything else is one clear line: a negative or unreadable value, a
/// percentage above 100, a size larger than the cap.
public enum ScanShareValue {

    /// The share in bytes of a cap of `capacity` bytes; `option` names the flag or key in errors.
    public static func parse(_ text: String, capacity: Int64, option: String) throws -> Int64 {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("-") {
            throw UsageError("scan share '\(text)' for \(option) is negative: give a percentage of the cache size (e.g. 2%), a size (e.g. 100M), or 0 for no share")
        }
        if trimmed.hasSuffix("%") {
            let number = String(trimmed.dropLast()).trimmingCharacters(in: .whitespaces)
            guard ByteSize.isPlainDecimal(number), let percent = Double(number) else {
                throw UsageError("invalid scan share '\(text)' for \(option): expected a percentage of the cache size (e.g. 2%), a size (e.g. 100M), or 0 for no share")
            }
            guard percent <= 100 else {
                throw UsageError("scan share '\(text)' for \(option) is more than the whole cache: at most 100%")
            }
            return Int64((Double(capacity) * percent / 100).rounded(.down))
        }
        let bytes: Int64
        do { bytes = try ByteSize.parse(trimmed, option: option) } catch {
            throw UsageError("invalid scan share '\(text)' for \(option): expected a percentage of the cache size (e.g. 2%), a size (e.g. 100M), or 0 for no share")
        }
        guard bytes <= capacity else {
            throw UsageError("scan share '\(text)' for \(option) is larger than the cache size (\(capacity) bytes): give at most the cache size, or a percentage")
        }
        return bytes
    }
}
