import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An IP address as 16 bytes: IPv6 as is, IPv4 in its IPv4-mapped form (`::ffff:a.b.c.d`).
///
/// One representation for both families means one range type covers both, and an IPv6 socket
/// address that merely wraps an IPv4 one (`::ffff:169.254.169.254`, or the NAT64 prefix
/// `64:ff9b::/96`) matches the IPv4 range it really reaches.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// Network byte order, 16 bytes.
    public let bytes: [UInt8]

    static let mappedPrefix: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]
    /// RFC 6052's well-known NAT64 prefix: the last 4 bytes are the IPv4 address reached.
    static let nat64Prefix: [UInt8] = [0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0]

    /// Strict text form: dotted IPv4 (`169.254.169.254`) or IPv6 (`fe80::1`, brackets and a zone
    /// `%eth0` allowed).
    public init?(_ text: String) {
        self.init(text, lenientIPv4: false)
    }

    /// The host of a URL if it is an address literal. IPv4 is read as URL parsers (and curl)
    /// read it, so `http://2852039166/` and `http://0xa9.254.169.254/` are 169.254.169.254 too.
    public init?(urlHost: String) {
        self.init(urlHost, lenientIPv4: true)
    }

    private init?(_ text: String, lenientIPv4: Bool) {
        // Asked for every request's host (`AddressPolicy`). ASCII text, every host curl connects
        // to, is read as bytes: the same answer as the Character-wise reading below (in ASCII a
        // Character is one byte, but for "\r\n", which is no address byte either way).
        let utf8 = Array(text.utf8)
        if utf8.allSatisfy({ $0 < 0x80 }) {
            guard let bytes = Self.parseASCII(utf8, lenientIPv4: lenientIPv4) else { return nil }
            self.bytes = bytes
            return
        }
        var t = Substring(text)
        if t.hasPrefix("["), t.hasSuffix("]") { t = t.dropFirst().dropLast() }
        if let zone = t.firstIndex(of: "%") { t = t[..<zone] }
        let s = String(t)
        if s.contains(":") {
            var a = in6_addr()
            guard inet_pton(AF_INET6, s, &a) == 1 else { return nil }
            bytes = withUnsafeBytes(of: a) { Array($0) }
        } else {
            guard !s.isEmpty, s.allSatisfy({ $0.isASCII && ($0.isHexDigit || $0 == "." || $0 == "x" || $0 == "X") }) else { return nil }
            var a = in_addr()
            let parsed = lenientIPv4 ? inet_aton(s, &a) != 0 : inet_pton(AF_INET, s, &a) == 1
            guard parsed else { return nil }
            bytes = Self.mappedPrefix + withUnsafeBytes(of: a) { Array($0) }
        }
    }

    /// `init(_:lenientIPv4:)` for ASCII text.
    private static func parseASCII(_ text: [UInt8], lenientIPv4: Bool) -> [UInt8]? {
        var t = text[...]
        if t.first == UInt8(ascii: "["), t.last == UInt8(ascii: "]") { t = t.dropFirst().dropLast() }
        if let zone = t.firstIndex(of: UInt8(ascii: "%")) { t = t[..<zone] }
        let s = Array(t) + [0]
        if t.contains(UInt8(ascii: ":")) {
            var a = in6_addr()
            guard s.withUnsafeBufferPointer({ inet_pton(AF_INET6, $0.baseAddress, &a) }) == 1 else { return nil }
            return withUnsafeBytes(of: a) { Array($0) }
        }
        guard !t.isEmpty, t.allSatisfy(isIPv4Byte) else { return nil }
        var a = in_addr()
        let parsed = s.withUnsafeBufferPointer { p in
            lenientIPv4 ? inet_aton(p.baseAddress, &a) != 0 : inet_pton(AF_INET, p.baseAddress, &a) == 1
        }
        guard parsed else { return nil }
        return mappedPrefix + withUnsafeBytes(of: a) { Array($0) }
    }

    /// Hex digits, '.', 'x' and 'X': what an IPv4 literal may hold (`0xa9.254.169.254`).
    private static func isIPv4Byte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
             UInt8(ascii: "A")...UInt8(ascii: "F"), UInt8(ascii: "."), UInt8(ascii: "x"), UInt8(ascii: "X"): return true
        default: return false
        }
    }

    /// The address of a socket address (`AF_INET` or `AF_INET6`); nil for other families.
    public init?(_ address: UnsafePointer<sockaddr>) {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let a = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            bytes = Self.mappedPrefix + withUnsafeBytes(of: a) { Array($0) }
        case AF_INET6:
            let a = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
            bytes = withUnsafeBytes(of: a) { Array($0) }
        default:
            return nil
        }
    }

    init(bytes: [UInt8]) {
        precondition(bytes.count == 16)
        self.bytes = bytes
    }

    /// An IPv4 address (in mapped form).
    public var isIPv4: Bool { Array(bytes[0..<12]) == Self.mappedPrefix }

    /// The address as the network sees it: a NAT64 address becomes the IPv4 address it reaches.
    var unwrapped: IPAddress {
        Array(bytes[0..<12]) == Self.nat64Prefix ? IPAddress(bytes: Self.mappedPrefix + bytes[12..<16]) : self
    }

    public var description: String {
        if isIPv4 { return bytes[12..<16].map(String.init).joined(separator: ".") }
        var a = in6_addr()
        withUnsafeMutableBytes(of: &a) { $0.copyBytes(from: bytes) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &a, &buffer, socklen_t(buffer.count)) != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A CIDR range such as `169.254.0.0/16` or `fe80::/10`; a bare address is a range of one.
public struct AddressRange: Hashable, Sendable, CustomStringConvertible {
    public let base: IPAddress
    /// Prefix length over the 16-byte form (an IPv4 `/16` is 96 + 16 here).
    public let prefixLength: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(String(parts[0])) else { return nil }
        let width = address.isIPv4 ? 32 : 128
        var length = width
        if parts.count == 2 {
            guard let n = Int(parts[1]), (0...width).contains(n) else { return nil }
            length = n
        }
        base = address
        prefixLength = (address.isIPv4 ? 96 : 0) + length
    }

    public func contains(_ address: IPAddress) -> Bool {
        let a = address.unwrapped.bytes, b = base.bytes
        var bits = prefixLength
        for i in 0..<16 where bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
            if a[i] & mask != b[i] & mask { return false }
            bits -= 8
        }
        return true
    }

    public var description: String { "\(base)/\(base.isIPv4 ? prefixLength - 96 : prefixLength)" }
}
