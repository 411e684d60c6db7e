import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An IP address written out (`127.0.0.1`, `::1`, `[::1]`), read with `inet_pton`.
///
/// This is how the proxy tells an address from a name: text that merely starts like an address
/// (`127.0.0.1.attacker.test`, `127.evil.com`) is a name, which anyone can point anywhere, and
/// must never be taken for this machine. IPv4 must be a strict dotted quad (no `127.1`, no octal
/// or hex parts, which resolvers read differently); IPv6 may be in brackets, without a zone.
struct IPLiteral: Equatable, Sendable {
    /// Network byte order: 4 bytes for IPv4, 16 for IPv6.
    let bytes: [UInt8]

    init?(_ text: String) {
        // Bytes, not Characters or Foundation's `contains`: asked of every request's Host header
        // and peer address, where the Character-wise check cost more than the parse.
        var s = Substring(text).utf8
        if s.first == UInt8(ascii: "["), s.last == UInt8(ascii: "]"), s.count >= 2 { s = s.dropFirst().dropLast() }
        guard !s.isEmpty, s.count <= 45, s.allSatisfy(Self.isAddressByte) else { return nil }
        let text = Array(s) + [0]
        if s.contains(UInt8(ascii: ":")) {
            var a = in6_addr()
            guard text.withUnsafeBufferPointer({ inet_pton(AF_INET6, $0.baseAddress, &a) }) == 1 else { return nil }
            bytes = withUnsafeBytes(of: a) { Array($0) }
        } else {
            var a = in_addr()
            guard text.withUnsafeBufferPointer({ inet_pton(AF_INET, $0.baseAddress, &a) }) == 1 else { return nil }
            bytes = withUnsafeBytes(of: a) { Array($0) }
        }
    }

    /// ASCII hex digits, '.' and ':': all an address literal is made of.
    private static func isAddressByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
             UInt8(ascii: "A")...UInt8(ascii: "F"), UInt8(ascii: "."), UInt8(ascii: ":"): return true
        default: return false
        }
    }

    /// 127.0.0.0/8, `::1`, and 127.0.0.0/8 written as an IPv4-mapped IPv6 address
    /// (`::ffff:127.0.0.1`, how a dual-stack socket reports an IPv4 loopback peer).
    var isLoopback: Bool {
        if bytes.count == 4 { return bytes[0] == 127 }
        if bytes == [UInt8](repeating: 0, count: 15) + [1] { return true }
        return bytes[0..<12].elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) && bytes[12] == 127
    }
}
