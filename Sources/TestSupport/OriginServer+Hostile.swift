/// Origins that lie about lengths: what the cache must survive without trapping.
extension OriginServer {
    /// A length an answer claims, written as the header's text (so numbers past Int64.max can
    /// be claimed too).
    public enum LengthClaim: Sendable {
        /// `206` with `Content-Range: bytes 0-9/TOTAL`, whatever range was asked for.
        case contentRangeTotal(String)
        /// `200` with `Content-Length: N`; the body that follows is 10 bytes.
        case contentLength(String)
    }

    /// Serves 10 bytes at `path` under a header that claims `claim` (GET and HEAD).
    public func setLengthClaim(_ path: String, _ claim: LengthClaim) {
        let body = Array("0123456789".utf8)
        switch claim {
        case let .contentRangeTotal(total):
            setResponse(path, status: 206, headers: [("Content-Range", "bytes 0-9/\(total)"), ("Content-Length", "10"),
                                                     ("ETag", "\"claim\""), ("Accept-Ranges", "bytes")], body: body)
        case let .contentLength(n):
            setResponse(path, status: 200, headers: [("Content-Length", n), ("Connection", "close")], body: body)
        }
    }
}
