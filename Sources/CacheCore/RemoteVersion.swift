/// The one rule for "did the remote file change?", used by the engine (a new answer against the
/// entry) and by the fetcher (a resumed transfer against its first answer).
///
/// Validators are compared where both sides have them: a different ETag, a different
/// Last-Modified, or a different length each mean another version. (A server may keep the ETag
/// and still bump Last-Modified, or send only one of the two: any one that differs is a change.)
public enum RemoteVersion {
    /// Why the second description is another version than the first, or nil if it is the same.
    public static func changeReason(etag: String?, lastModified: String?, length: Int64?,
                                    to newETag: String?, _ newLastModified: String?, _ newLength: Int64?) -> String? {
        if let a = etag, let b = newETag, a != b { return "ETag \(a) became \(b)" }
        if let a = lastModified, let b = newLastModified, a != b { return "Last-Modified \(a) became \(b)" }
        if let a = length, let b = newLength, a != b { return "length \(a) became \(b)" }
        return nil
    }
}
