import Foundation

/// A command-line or config-file value that could not be understood.
///
/// The message names the option and the offending value and says what was expected, because it
/// is the only line the user gets (see `ErrorReporting`).
public struct UsageError: Error, CustomStringConvertible, Equatable, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Byte counts as people write them: `123` (bytes), `64K`, `64M`, `5G`, `1.5G`, `500MiB`, `2TB`.
///
/// `K/M/G/T` and `KiB/MiB/GiB/TiB` are powers of 1024 (so `5G` is exactly the 5 GiB default);
/// `KB/MB/GB/TB` are SI powers of 1000, as the letters promise. Case does not matter.
public enum ByteSize {
    private static let units: [(suffix: String, factor: Double)] = [
        ("kib", 0x1p10), ("mib", 0x1p20), ("gib", 0x1p30), ("tib", 0x1p40),
        ("kb", 1e3), ("mb", 1e6), ("gb", 1e9), ("tb", 1e12),
        ("k", 0x1p10), ("m", 0x1p20), ("g", 0x1p30), ("t", 0x1p40),
        ("b", 1), ("", 1),
    ]

    /// Parses `text`; `option` names the flag or key in the error message.
    public static func parse(_ text: String, option: String) throws -> Int64 {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let lower = trimmed.lowercased()
        let failure = UsageError("invalid size '\(text)' for \(option): expected a number of bytes with an optional unit, e.g. 123, 64M, 5G, 1.5G or 500MiB")
        for (suffix, factor) in units where lower.hasSuffix(suffix) {
            let number = String(lower.dropLast(suffix.count)).trimmingCharacters(in: .whitespaces)
            guard isPlainDecimal(number), let value = Double(number) else { continue }
            let bytes = (value * factor).rounded(.down)
            guard bytes < 9.2e18 else { throw UsageError("size '\(text)' for \(option) is too large") }
            return Int64(bytes)
        }
        throw failure
    }

    /// One position of a `--range` (`CacheCore.ByteRangeSpec` reads the `A-B` around it): plain
    /// digits are a byte offset, inclusive at the end as HTTP writes ranges (`0-1023` is the first
    /// KiB); a size with a unit is where the range starts or stops, so a last position written as
    /// one is exclusive and `10M-30M` is the 20 MiB from 10 MiB to 30 MiB (and `0-1K` is `0-1023`).
    /// `isEnd` says which it is; nil when `text` is neither.
    public static func rangePosition(_ text: Substring, isEnd: Bool) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.allSatisfy({ $0.isASCII && $0.isNumber }) { return Int64(trimmed) }
        guard trimmed.last?.isLetter == true, let bytes = try? parse(trimmed, option: "--range") else { return nil }
        return isEnd ? bytes - 1 : bytes
    }

    /// Digits with at most one decimal point: no sign, exponent, hex, `inf` or `nan`, which
    /// `Double(_:)` would otherwise accept.
    static func isPlainDecimal(_ s: String) -> Bool {
        var digits = 0, dots = 0
        for c in s {
            if c.isASCII && c.isNumber { digits += 1 } else if c == "." { dots += 1 } else { return false }
        }
        return digits > 0 && dots <= 1
    }
}

/// Durations as people write them: `0s`, `30s`, `5m`, `2h`, `1d`, `1h30m`, `250ms`, `1.5h`.
/// A bare number means seconds.
public enum DurationValue {
    private static let units: [(suffix: String, seconds: Double)] = [
        ("us", 0.000_001), ("µs", 0.000_001), ("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400), ("w", 7 * 86400),
    ]

    public static func parse(_ text: String, option: String) throws -> TimeInterval {
        let failure = UsageError("invalid duration '\(text)' for \(option): expected a number with a unit, e.g. 0s, 30s, 5m, 2h or 1d")
        let s = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard !s.isEmpty else { throw failure }
        if ByteSize.isPlainDecimal(s), let value = Double(s) { return try finite(value) }
        var total: TimeInterval = 0
        var rest = Substring(s)
        while !rest.isEmpty {
            let number = rest.prefix { ($0.isASCII && $0.isNumber) || $0 == "." }
            rest = rest.dropFirst(number.count)
            let unitText = rest.prefix { $0.isLetter }
            rest = rest.dropFirst(unitText.count)
            guard ByteSize.isPlainDecimal(String(number)), let value = Double(number),
                  let unit = units.first(where: { $0.suffix == unitText }) else { throw failure }
            total += value * unit.seconds
        }
        return try finite(total)

        /// Enough digits make a Double infinite, which no timer or date can take.
        func finite(_ seconds: TimeInterval) throws -> TimeInterval {
            guard seconds.isFinite else { throw UsageError("duration '\(text)' for \(option) is too large") }
            return seconds
        }
    }
}

/// `--header "Name: value"`, checked the way the origin will see it.
public enum HeaderLine {
    public static func validate(_ text: String, option: String = "--header") throws -> String {
        guard let colon = text.firstIndex(of: ":") else {
            throw UsageError("invalid header '\(text)' for \(option): expected 'Name: value'")
        }
        let name = text[..<colon].trimmingCharacters(in: .whitespaces)
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        let token = CharacterSet(charactersIn: "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        guard !name.isEmpty, name.unicodeScalars.allSatisfy(token.contains) else {
            throw UsageError("invalid header '\(text)' for \(option): '\(name)' is not a valid header name")
        }
        guard !value.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
            throw UsageError("invalid header '\(text)' for \(option): the value contains a line break")
        }
        // A daemon's control key (`ControlRequest.keyHeader`) proves its owner to a proxy's
        // owner-only pages: sent with every fetch, it would hand a daemon's status and control
        // to whatever a fetch reaches (another daemon's proxy, an origin's logs).
        guard name.lowercased() != controlKeyHeader else {
            throw UsageError("invalid header '\(name)' for \(option): it carries a daemon's control key, which is never sent with a fetch")
        }
        return "\(name): \(value)"
    }

    /// `X-Httpcachefs-Control`, lower-cased.
    static let controlKeyHeader = "x-httpcachefs-control"

    /// The name part, lower-cased, for "command line wins" merging.
    public static func name(of line: String) -> String {
        String(line.prefix { $0 != ":" }).trimmingCharacters(in: .whitespaces).lowercased()
    }
}

/// `yes/no`-style booleans in the config file.
public enum BoolValue {
    public static func parse(_ text: String, option: String) throws -> Bool {
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw UsageError("invalid value '\(text)' for \(option): expected true or false")
        }
    }
}

/// `~/x` to `$HOME/x`, since a config file is not expanded by a shell.
public func expandingTilde(_ path: String) -> String {
    guard path == "~" || path.hasPrefix("~/") else { return path }
    let home = ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()
    return home + path.dropFirst()
}
