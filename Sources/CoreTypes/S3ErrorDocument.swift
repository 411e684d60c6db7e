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
