/// Pieces of HTTP syntax (RFC 9110) that the proxy and the HLS module both read.
extension StringProtocol {
    /// Trims RFC 9110 optional whitespace (SP and HTAB). Inlinable: the curl loop trims every
    /// answer's head fields with it (`Content-Range` alone five times), from another module.
    @inlinable
    public func trimmingOWS() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }

    /// The lower-cased `type/subtype` of a Content-Type, without parameters.
    public var mediaTypeEssence: String {
        // Asked several times per proxied request: ASCII text (every Content-Type in practice)
        // is cut and lower-cased as bytes, with the same result as the general way below. One
        // String first, so that the byte work is concrete code, not generic code that a caller
        // in another module runs unspecialized (slower than Foundation's).
        var text = description
        if let essence = text.withUTF8({ HTTPSyntax.asciiMediaTypeEssence($0) }) { return essence }
        return String(split(separator: ";", maxSplits: 1).first ?? "").trimmingOWS().lowercased()
    }
}

extension String {
    /// Whether the text can go out as a header field's value (RFC 9110 5.5): no control character
    /// but HTAB. An origin's ETag, Last-Modified or Content-Type may hold one (curl hands a header
    /// line on as it came), and the proxy's HTTP encoder refuses such a value by closing the
    /// connection: the client would get no answer at all. Concrete and inlinable: the proxy asks
    /// it of three values per answer, from another module (generic code would run unspecialized).
    @inlinable
    public var isSendableFieldValue: Bool {
        utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }
}

public enum HTTPSyntax {
    /// `mediaTypeEssence` of ASCII text; nil if the text is not ASCII.
    public static func asciiMediaTypeEssence(_ b: UnsafeBufferPointer<UInt8>) -> String? {
        if b.contains(where: { $0 >= 0x80 }) { return nil }
        let semicolon = UInt8(ascii: ";"), space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
        // `split`'s first piece: the empty pieces before it are skipped, as `split` omits them.
        var lo = 0
        while lo < b.count, b[lo] == semicolon { lo += 1 }
        var hi = lo
        while hi < b.count, b[hi] != semicolon { hi += 1 }
        while lo < hi, b[lo] == space || b[lo] == tab { lo += 1 }
        while hi > lo, b[hi - 1] == space || b[hi - 1] == tab { hi -= 1 }
        return String(unsafeUninitializedCapacity: hi - lo) { out in
            for i in 0..<(hi - lo) {
                let c = b[lo + i]
                out[i] = c >= 0x41 && c <= 0x5A ? c | 0x20 : c
            }
            return hi - lo
        }
    }
}
