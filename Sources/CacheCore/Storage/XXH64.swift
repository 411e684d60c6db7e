/// XXH64, streaming, pure Swift: the checksum of every extent on disk.
///
/// Computed while the bytes stream in, so `cache verify` can later prove that what the index
/// records as present is what was received. XXH64 rather than a CRC because it runs at memory
/// speed without special instructions: a table-driven CRC-32C in Swift took half the CPU time of
/// a cold read.
public struct XXH64: Sendable {
    private static let p1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let p3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let p4: UInt64 = 0x85EB_CA77_C2B2_AE63
    private static let p5: UInt64 = 0x27D4_EB2F_1656_67C5

    private var v1: UInt64 = 0, v2: UInt64 = 0, v3: UInt64 = 0, v4: UInt64 = 0
    private var total: UInt64 = 0
    /// Bytes not yet forming a whole 32-byte stripe.
    private var tail: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var tailCount = 0

    public init() {
        v1 = Self.p1 &+ Self.p2
        v2 = Self.p2
        v3 = 0
        v4 = 0 &- Self.p1
    }

    @inline(__always) private static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 - r)) }
    @inline(__always) private static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        rotl(acc &+ input &* p2, 31) &* p1
    }
    @inline(__always) private static func merge(_ acc: UInt64, _ v: UInt64) -> UInt64 {
        (acc ^ round(0, v)) &* p1 &+ p4
    }

    public mutating func update(_ buffer: UnsafeRawBufferPointer) {
        guard var p = buffer.baseAddress, buffer.count > 0 else { return }
        var n = buffer.count
        total &+= UInt64(n)
        if tailCount > 0 {
            withUnsafeMutableBytes(of: &tail) { t in
                let take = min(32 - tailCount, n)
                (t.baseAddress! + tailCount).copyMemory(from: p, byteCount: take)
                tailCount += take
                p += take
                n -= take
            }
            guard tailCount == 32 else { return }
            let t = tail
            v1 = Self.round(v1, UInt64(littleEndian: t.0)); v2 = Self.round(v2, UInt64(littleEndian: t.1))
            v3 = Self.round(v3, UInt64(littleEndian: t.2)); v4 = Self.round(v4, UInt64(littleEndian: t.3))
            tailCount = 0
        }
        var a = v1, b = v2, c = v3, d = v4
        while n >= 32 {
            a = Self.round(a, UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)))
            b = Self.round(b, UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
            c = Self.round(c, UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 16, as: UInt64.self)))
            d = Self.round(d, UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 24, as: UInt64.self)))
            p += 32
            n -= 32
        }
        v1 = a; v2 = b; v3 = c; v4 = d
        if n > 0 {
            withUnsafeMutableBytes(of: &tail) { $0.baseAddress!.copyMemory(from: p, byteCount: n) }
            tailCount = n
        }
    }

    public var value: UInt64 {
        var h: UInt64
        if total >= 32 {
            h = Self.rotl(v1, 1) &+ Self.rotl(v2, 7) &+ Self.rotl(v3, 12) &+ Self.rotl(v4, 18)
            h = Self.merge(h, v1); h = Self.merge(h, v2); h = Self.merge(h, v3); h = Self.merge(h, v4)
        } else {
            h = v3 &+ Self.p5
        }
        h &+= total
        var t = tail
        let count = tailCount
        withUnsafeBytes(of: &t) { raw in
            var i = 0
            while i + 8 <= count {
                h ^= Self.round(0, UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
                h = Self.rotl(h, 27) &* Self.p1 &+ Self.p4
                i += 8
            }
            if i + 4 <= count {
                h ^= UInt64(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt32.self))) &* Self.p1
                h = Self.rotl(h, 23) &* Self.p2 &+ Self.p3
                i += 4
            }
            while i < count {
                h ^= UInt64(raw[i]) &* Self.p5
                h = Self.rotl(h, 11) &* Self.p1
                i += 1
            }
        }
        h ^= h >> 33; h &*= Self.p2
        h ^= h >> 29; h &*= Self.p3
        h ^= h >> 32
        return h
    }

    public static func hash(_ bytes: [UInt8]) -> UInt64 {
        var x = XXH64()
        bytes.withUnsafeBytes { x.update($0) }
        return x.value
    }
}
