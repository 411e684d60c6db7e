import Foundation

/// This process's mark in the `Via` header of its origin requests, which its own proxy refuses
/// (508): a redirect back into the proxy, or a chain of proxies that comes back, ends at once
/// instead of taking every connection for dozens of hops. Random per process, so two daemons on
/// one machine may still proxy for each other.
enum LoopMarker {
    static let token: String = {
        var bytes = [UInt8](repeating: 0, count: 8)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        return "httpcachefs-" + bytes.map { String(format: "%02x", $0) }.joined()
    }()

    /// The header's value: protocol version and pseudonym (RFC 9110 7.6.3).
    static var via: String { "1.1 \(token)" }
}
