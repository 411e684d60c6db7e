import CoreTypes

/// One entry's row in the index (`EntryRow`): what the entry machine hands the index to
/// save (`EntryStateMachine.row()`, `rowToSave()`) and what a start loads it from (`loaded`).
package struct EntryRow: Sendable, Hashable {
    package var id: Int64
    package var key: String
    package var url: String
    package var finalURL: String
    package var length: Int64?
    package var contentType: String?
    package var etag: String?
    package var lastModified: String?
    package var acceptsRanges: Bool
    package var generation: Int64
    package var validatedAt: Double
    package var lastAccess: Double
    package var hits: Int64
    package var misses: Int64
    package var bytesFromCache: Int64
    package var bytesFromOrigin: Int64
    package var lastError: String?

    package init(id: Int64, key: String, url: String, finalURL: String, length: Int64?, contentType: String?,
                 etag: String?, lastModified: String?, acceptsRanges: Bool, generation: Int64, validatedAt: Double,
                 lastAccess: Double, hits: Int64, misses: Int64, bytesFromCache: Int64, bytesFromOrigin: Int64,
                 lastError: String?) {
        self.id = id
        self.key = key
        self.url = url
        self.finalURL = finalURL
        self.length = length
        self.contentType = contentType
        self.etag = etag
        self.lastModified = lastModified
        self.acceptsRanges = acceptsRanges
        self.generation = generation
        self.validatedAt = validatedAt
        self.lastAccess = lastAccess
        self.hits = hits
        self.misses = misses
        self.bytesFromCache = bytesFromCache
        self.bytesFromOrigin = bytesFromOrigin
        self.lastError = lastError
    }
}
