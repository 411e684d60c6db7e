import Foundation

/// The error document S3 answers a refused request with (`<Error><Code>SignatureDoesNotMatch</Code>
/// <Message>…</Message>…</Error>`): its code and message, for a one-line error.
///
/// Read by hand rather than by an XML parser: only two elements' text is wanted, from at most
/// `maxBytes` of outside input, and the result goes into log lines and error messages, so it is
/// bounded (`maxText` characters each), unescaped for the five predefined entities only, and
/// stripped of control characters.
public struct S3ErrorDocument: Sendable, Equatable, CustomStringConvertible {
    public var code: String
    public var message: String?

    /// The most of an error answer that is read (the rest is not waited for).
    public static let maxBytes = 16 << 10
    static let maxText = 300

    public init(code: String, message: String?) {
        self.code = code
        self.message = message
    }

    public static func == (a: S3ErrorDocument, b: S3ErrorDocument) -> Bool { a.code == b.code && a.message == b.message }

    /// The document's code and message, or nil when `bytes` hold no `<Error>` with a `<Code>`.
    public static func parse(_ bytes: [UInt8]) -> S3ErrorDocument? {
        let text = String(decoding: bytes.prefix(maxBytes), as: UTF8.self)
        guard text.contains("<Error>"), let code = element("Code", in: text), !code.isEmpty else { return nil }
        return S3ErrorDocument(code: code, message: element("Message", in: text).flatMap { $0.isEmpty ? nil : $0 })
    }

    static func element(_ name: String, in text: String) -> String? {
        guard let open = text.range(of: "<\(name)>"),
              let close = text.range(of: "</\(name)>", range: open.upperBound..<text.endIndex) else { return nil }
        var value = String(text[open.upperBound..<close.lowerBound])
        for (entity, character) in [("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&apos;", "'"), ("&amp;", "&")] {
            value = value.replacingOccurrences(of: entity, with: character)
        }
        let clean = String(String.UnicodeScalarView(value.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : $0 }))
            .trimmingCharacters(in: .whitespaces)
        return clean.count > maxText ? String(clean.prefix(maxText)) + "…" : clean
    }

    /// `Code: Message`.
    public var description: String { message.map { "\(code): \($0)" } ?? code }

    /// What the code means for the user, and what to do, for the codes a reader meets; nil for
    /// others (the code and message say it).
    public var meaning: String? {
        switch code {
        case "AccessDenied": return "the keys may not read this object (the bucket's or the key's policy)"
        case "NoSuchKey": return "the object is gone (deleted or renamed since it was listed): a refresh drops it"
        case "NoSuchBucket": return "no such bucket at this endpoint"
        case "ExpiredToken", "TokenRefreshRequired":
            return "the session token expired: mount again with fresh keys (a profile's credential_process is run again then)"
        case "InvalidAccessKeyId": return "the endpoint knows no such access key id"
        case "SignatureDoesNotMatch": return "a wrong secret access key, or keys of another endpoint"
        case "SlowDown", "ServiceUnavailable", "Throttling", "TooManyRequests":
            return "the server asks for fewer requests: retried with growing delays (--tpslimit lowers the rate)"
        case "RequestTimeTooSkewed": return "this machine's clock is off the server's"
        case "PreconditionFailed": return "the object changed since it was opened"
        default: return nil
        }
    }

    /// The server's time a `RequestTimeTooSkewed` document names (`<ServerTime>`), if any.
    public var serverTime: Date? { serverTimeText.flatMap(HTTPDate.parseISO8601) }
    var serverTimeText: String?

    /// The document with its `ServerTime` (for `RequestTimeTooSkewed`).
    public static func parseWithTime(_ bytes: [UInt8]) -> S3ErrorDocument? {
        guard var document = parse(bytes) else { return nil }
        document.serverTimeText = element("ServerTime", in: String(decoding: bytes.prefix(maxBytes), as: UTF8.self))
        return document
    }
}

/// The last error document each URL was answered with, for the messages that report its failure
/// (the mount's check): the fetcher notes them, the error it reports carries only the status.
/// Bounded: past `limit` URLs it starts over. Threads: any.
public enum S3ErrorLog {
    private static let documents = LockedValue([String: S3ErrorDocument]())
    static let limit = 1000

    public static func note(_ document: S3ErrorDocument, url: String) {
        documents.withLock {
            if $0.count >= limit { $0.removeAll() }
            $0[url] = document
        }
    }

    public static func last(url: String) -> S3ErrorDocument? { documents.withLock { $0[url] } }
}
