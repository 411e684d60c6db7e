/// CRC-32C (Castagnoli), slicing-by-8, pure Swift: the checksum of every extent on disk.
///
/// Computed while the bytes stream in, so `cache verify` can later prove that what the index
/// records as present is what was received.
public struct CRC32C: Sendable {
    public private(set) var value: UInt32 = 0

    public init() {}

    private static let tables: [[UInt32]] = {
        var t = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
            t[0][i] = c
        }
        for i in 0..<256 {
            for k in 1..<8 { t[k][i] = (t[k - 1][i] >> 8) ^ t[0][Int(t[k - 1][i] & 0xFF)] }
        }
        return t
    }()
    private static let flat: [UInt32] = tables.flatMap { $0 }

    public mutating func update(_ buffer: UnsafeRawBufferPointer) {
        var crc = ~value
        Self.flat.withUnsafeBufferPointer { t in
            var p = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var n = buffer.count
            while n >= 8 {
                let lo = UInt32(littleEndian: UnsafeRawPointer(p).loadUnaligned(as: UInt32.self)) ^ crc
                let hi = UInt32(littleEndian: UnsafeRawPointer(p + 4).loadUnaligned(as: UInt32.self))
                crc = t[7 * 256 + Int(lo & 0xFF)] ^ t[6 * 256 + Int((lo >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((lo >> 16) & 0xFF)] ^ t[4 * 256 + Int(lo >> 24)]
                    ^ t[3 * 256 + Int(hi & 0xFF)] ^ t[2 * 256 + Int((hi >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((hi >> 16) & 0xFF)] ^ t[0 * 256 + Int(hi >> 24)]
                p += 8
                n -= 8
            }
            while n > 0 {
                crc = t[Int((crc ^ UInt32(p.pointee)) & 0xFF)] ^ (crc >> 8)
                p += 1
                n -= 1
            }
        }
        value = ~crc
    }

    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var c = CRC32C()
        bytes.withUnsafeBytes { if $0.count > 0 { c.update($0) } }
        return c.value
    }
}
