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
        var t = Substring(text)
        if t.hasPrefix("["), t.hasSuffix("]") { t = t.dropFirst().dropLast() }
        let s = String(t)
        guard !s.isEmpty, s.utf8.count <= 45, s.allSatisfy({ $0.isASCII && ($0.isHexDigit || $0 == "." || $0 == ":") }) else {
            return nil
        }
        if s.contains(":") {
            var a = in6_addr()
            guard inet_pton(AF_INET6, s, &a) == 1 else { return nil }
            bytes = withUnsafeBytes(of: a) { Array($0) }
        } else {
            var a = in_addr()
            guard inet_pton(AF_INET, s, &a) == 1 else { return nil }
            bytes = withUnsafeBytes(of: a) { Array($0) }
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
