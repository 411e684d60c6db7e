import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fetch a locked block registered in its entry's in-flight table, to be started once the
/// shard lock is let go (`EngineCore.launch`).
struct Launch: Sendable {
    let entry: EntryHandle
    let fetch: ReadPlanner.Fetch
    let id: Int
}

extension EngineCore {
    /// Starts a launch the entry's machine asked for (`FetchCoordinator.launch`). Call with no
    /// lock held.
    func launch(_ l: Launch) { fetches.launch(fetchID: l.id, entry: l.entry, fetch: l.fetch, for: self) }

    func launch(fetchID: Int, entry: EntryHandle, fetch: ReadPlanner.Fetch) {
        fetches.launch(fetchID: fetchID, entry: entry, fetch: fetch, for: self)
    }
}

extension HeadDecision.Provenance {
    /// What `head` shows against the entry's version `info`.
    init(head: ResponseHead, entry info: EntryInfo, rangeAsked: Bool) {
        let ours = Self.mediaType(info.contentType), theirs = Self.mediaType(head.contentType)
        self.init(namesVersion: head.etag != nil || head.lastModified != nil,
                  otherMediaType: ours != nil && theirs != nil && ours != theirs,
                  rangeAsked: rangeAsked, rangesServed: info.acceptsRanges)
    }

    /// "text/html; charset=utf-8" → "text/html"; nil for none.
    static func mediaType(_ contentType: String?) -> String? {
        guard let contentType else { return nil }
        // ASCII (every Content-Type in practice): where `.whitespaces` is SP and HTAB, exactly
        // what `mediaTypeEssence` trims, read as bytes (Foundation's trimming showed in a miss's
        // profile on the curl loop).
        var text = contentType
        if let type = text.withUTF8(HTTPSyntax.asciiMediaTypeEssence) { return type.isEmpty ? nil : type }
        let type = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        return type.isEmpty ? nil : type
    }
}

extension EntryInfo {
    var ifRangeValidator: String? { FetchRequest.ifRangeValidator(etag: etag, lastModified: lastModified) }
}
