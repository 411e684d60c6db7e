import CoreTypes

/// The one rule for "did the remote file change?", used by the engine (a new answer against the
/// entry) and by the fetcher (a resumed transfer against its first answer).
///
/// Validators are compared where both sides have them: a different ETag, a different
/// Last-Modified, or a different length each mean another version. (A server may keep the ETag
/// and still bump Last-Modified, or send only one of the two: any one that differs is a change.)
///
/// `ignoringETag` compares no ETags: `--ignore-etag`, or an origin whose ETags are known to change
/// on every answer while the file stays (load-balanced servers whose ETags include the inode,
/// Apache's default). An ETag that changed alone (`etagRotated`: same length, same Last-Modified)
/// is still a change unless there is evidence that the origin's ETags rotate: one answer of
/// another file of the same size and date would otherwise mix its bytes with the cached ones.
public enum RemoteVersion {
    /// Why the second description is another version than the first, or nil if it is the same.
    public static func changeReason(etag: String?, lastModified: String?, length: Int64?,
                                    to newETag: String?, _ newLastModified: String?, _ newLength: Int64?,
                                    ignoringETag: Bool = false) -> String? {
        if !ignoringETag, let a = etag, let b = newETag, a != b { return "ETag \(a) became \(b)" }
        if let a = lastModified, let b = newLastModified, a != b { return "Last-Modified \(a) became \(b)" }
        if let a = length, let b = newLength, a != b { return "length \(a) became \(b)" }
        return nil
    }

    /// Only the ETag changed: the length and Last-Modified are known on both sides and the same.
    public static func etagRotated(etag: String?, lastModified: String?, length: Int64?,
                                   to newETag: String?, _ newLastModified: String?, _ newLength: Int64?) -> Bool {
        guard let a = etag, let b = newETag, a != b else { return false }
        guard let m = lastModified, m == newLastModified, let l = length, l == newLength else { return false }
        return true
    }
}
