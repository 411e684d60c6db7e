import Foundation
import Logging

/// Reads structured values off the front of a fuzzer's byte string, so one input can choose
/// numbers (lengths, offsets) and text at once. Running out of bytes yields zeros and "",
/// never a failure: every input is a valid test case.
public struct FuzzInput {
    private let bytes: [UInt8]
    private var position = 0

    public init(_ data: UnsafePointer<UInt8>, _ count: Int) {
        bytes = Array(UnsafeBufferPointer(start: data, count: count))
    }

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Bytes not consumed yet.
    public var rest: [UInt8] { Array(bytes[position...]) }
    public var isAtEnd: Bool { position >= bytes.count }

    public mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    public mutating func bool() -> Bool { byte() & 1 == 1 }

    /// A little-endian integer of `width` bytes (at most 8), as Int64 bits.
    public mutating func int64(width: Int = 8) -> Int64 {
        var v: UInt64 = 0
        for k in 0..<min(width, 8) { v |= UInt64(byte()) << (8 * UInt64(k)) }
        return Int64(bitPattern: v)
    }

    /// A non-negative Int64 spread over all magnitudes: the first byte picks how many bits are
    /// kept, so small offsets and values near Int64.max are both common.
    public mutating func offset() -> Int64 {
        let bits = Int(byte() % 64)
        let raw = UInt64(bitPattern: int64())
        return Int64(bits == 0 ? 0 : raw & ((1 << UInt64(bits)) - 1))
    }

    /// Up to `maxBytes` bytes, ending early at a 0 byte (which is consumed), as UTF-8 text with
    /// invalid sequences repaired.
    public mutating func text(maxBytes: Int = 256) -> String {
        var out: [UInt8] = []
        while position < bytes.count, out.count < maxBytes {
            let b = byte()
            if b == 0 { break }
            out.append(b)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Everything left, as text.
    public mutating func restText() -> String {
        defer { position = bytes.count }
        return String(decoding: rest, as: UTF8.self)
    }
}

/// An invariant of a parser: when it fails the input is a bug even though nothing crashed, so
/// the process aborts and libFuzzer records the input like a crash.
public func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
                      file: StaticString = #fileID, line: UInt = #line) {
    if !condition() {
        FileHandle.standardError.write(Data("invariant broken at \(file):\(line): \(message())\n".utf8))
        abort()
    }
}

/// True when `s` holds a C0 control character or DEL (what must never reach a file name or a
/// header line).
public func hasControlCharacter(_ s: String) -> Bool {
    s.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
}

/// A logger that drops everything: the parsers log what they skip, and a log line per input
/// would only slow the fuzzer down.
public let silentLogger: Logger = {
    var logger = Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() })
    logger.logLevel = .critical
    return logger
}()
