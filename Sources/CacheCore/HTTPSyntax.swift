/// Pieces of HTTP syntax (RFC 9110) that the proxy and the HLS module both read.
extension StringProtocol {
    /// Trims RFC 9110 optional whitespace (SP and HTAB).
    public func trimmingOWS() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }

    /// The lower-cased `type/subtype` of a Content-Type, without parameters.
    public var mediaTypeEssence: String {
        // Asked several times per proxied request: ASCII text (every Content-Type in practice)
        // is cut and lower-cased byte by byte, with the same result as the general way below.
        let bytes = utf8
        if bytes.allSatisfy({ $0 < 0x80 }) {
            let semicolon = UInt8(ascii: ";"), space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
            // split's first piece: empty pieces before it are skipped, as `split` omits them.
            var start = bytes.startIndex
            while start < bytes.endIndex, bytes[start] == semicolon { bytes.formIndex(after: &start) }
            let end = bytes[start...].firstIndex(of: semicolon) ?? bytes.endIndex
            var piece = Array(bytes[start..<end])[...]
            while let first = piece.first, first == space || first == tab { piece = piece.dropFirst() }
            while let last = piece.last, last == space || last == tab { piece = piece.dropLast() }
            return String(decoding: piece.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
        }
        return String(split(separator: ";", maxSplits: 1).first ?? "").trimmingOWS().lowercased()
    }
}
