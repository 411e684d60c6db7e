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
        String(split(separator: ";", maxSplits: 1).first ?? "").trimmingOWS().lowercased()
    }
}
