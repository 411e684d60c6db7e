/// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), in plain Swift, for signing proxy URLs and S3
/// requests (`SigV4`): in CoreTypes so that the proxy and the fetcher share one implementation.
///
/// Why not a library: swift-crypto would bring BoringSSL into every build of the package
/// (CI builds it four times, on two cores), and the proxy needs one keyed hash of a short string
/// per URL it hands out or serves. Foundation on Linux has no HMAC. This is the textbook
/// algorithm, checked against the FIPS 180-2 examples and the RFC 4231 test vectors
/// (`HMACSHA256Tests`). It is not constant-time in the key's length (keys here are always 32
/// bytes) and makes no claim beyond what the proxy needs: computing MACs, compared with
/// `HMACSHA256.equal` in constant time.
///
/// Speed: a playlist rewrite signs every segment's URL (150,000 for a long playlist). The
/// padded keys' first blocks are compressed once per key (`init(key:)`), so a MAC of a URL
/// under 55 bytes costs two compressions, and one more per 64 bytes of URL.
public struct HMACSHA256: Sendable {
    /// The state after the inner and outer padded keys' blocks.
    private let inner: SHA256
    private let outer: SHA256

    public init(key: [UInt8]) {
        var k = key.count > 64 ? SHA256.hash(key) : key
        k += [UInt8](repeating: 0, count: 64 - k.count)
        var i = SHA256(), o = SHA256()
        i.update(k.map { $0 ^ 0x36 })
        o.update(k.map { $0 ^ 0x5C })
        inner = i
        outer = o
    }

    /// The 32-byte MAC of `message`.
    public func mac<Bytes: Sequence>(_ message: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var i = inner
        i.update(Array(message))
        var o = outer
        o.update(i.finish())
        return o.finish()
    }

    /// Whether two MACs are equal, in time that depends only on their lengths: an early exit at
    /// the first differing byte would tell a prober how many leading bytes of a forgery are right.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<a.count { diff |= a[i] ^ b[i] }
        return diff == 0
    }
}

/// SHA-256, streaming: `update` as often as needed, then `finish` once.
public struct SHA256: Sendable {
    private var h: State =
        (0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19)
    /// Bytes not yet compressed (fewer than 64).
    private var pending: [UInt8] = []
    private var totalBytes: UInt64 = 0

    public init() {}

    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var s = SHA256()
        s.update(bytes)
        return s.finish()
    }

    public mutating func update(_ bytes: [UInt8]) {
        totalBytes &+= UInt64(bytes.count)
        var start = 0
        var state = h
        if !pending.isEmpty {
            let take = min(64 - pending.count, bytes.count)
            pending += bytes[0..<take]
            start = take
            guard pending.count == 64 else { return }
            pending.withUnsafeBufferPointer { Self.compress(&state, $0.baseAddress!) }
            pending.removeAll(keepingCapacity: true)
        }
        bytes.withUnsafeBufferPointer { buffer in
            while start + 64 <= buffer.count {
                Self.compress(&state, buffer.baseAddress! + start)
                start += 64
            }
        }
        h = state
        if start < bytes.count { pending += bytes[start...] }
    }

    /// The digest; the value is spent afterwards.
    public mutating func finish() -> [UInt8] {
        let bitLength = totalBytes &* 8
        var tail: [UInt8] = [0x80]
        let used = (pending.count + 1) % 64
        tail += [UInt8](repeating: 0, count: used <= 56 ? 56 - used : 120 - used)
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        let saved = totalBytes
        update(tail)
        totalBytes = saved
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in [h.0, h.1, h.2, h.3, h.4, h.5, h.6, h.7] {
            out += [UInt8(word >> 24), UInt8(truncatingIfNeeded: word >> 16), UInt8(truncatingIfNeeded: word >> 8),
                    UInt8(truncatingIfNeeded: word)]
        }
        return out
    }

    private static let roundConstants: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    typealias State = (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)

    /// One 64-byte block into `h`. Static, on local values, the message schedule on the stack:
    /// a method touching `self` inside closures, and a heap array per block, cost twenty times
    /// as much.
    @inline(__always)
    private static func compress(_ h: inout State, _ block: UnsafePointer<UInt8>) {
        @inline(__always) func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x &>> n) | (x &<< (32 &- n)) }
        var w: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32,
                UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32,
                UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32,
                UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
             0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var (a, b, c, d, e, f, g, hh) = h
        withUnsafeMutableBytes(of: &w) { raw in
            let w = raw.bindMemory(to: UInt32.self)
            for t in 0..<16 {
                let i = t &* 4
                w[t] = UInt32(block[i]) &<< 24 | UInt32(block[i &+ 1]) &<< 16 | UInt32(block[i &+ 2]) &<< 8 | UInt32(block[i &+ 3])
            }
            for t in 16..<64 {
                let s0 = rotr(w[t &- 15], 7) ^ rotr(w[t &- 15], 18) ^ (w[t &- 15] &>> 3)
                let s1 = rotr(w[t &- 2], 17) ^ rotr(w[t &- 2], 19) ^ (w[t &- 2] &>> 10)
                w[t] = w[t &- 16] &+ s0 &+ w[t &- 7] &+ s1
            }
            roundConstants.withUnsafeBufferPointer { k in
                for t in 0..<64 {
                    let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
                    let ch = (e & f) ^ (~e & g)
                    let t1 = hh &+ s1 &+ ch &+ k[t] &+ w[t]
                    let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
                    let maj = (a & b) ^ (a & c) ^ (b & c)
                    let t2 = s0 &+ maj
                    hh = g; g = f; f = e; e = d &+ t1
                    d = c; c = b; b = a; a = t1 &+ t2
                }
            }
        }
        h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e, h.5 &+ f, h.6 &+ g, h.7 &+ hh)
    }
}
