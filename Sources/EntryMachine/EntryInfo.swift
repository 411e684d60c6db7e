import CoreTypes
import Foundation

/// What the cache knows about one remote file, as the front doors see it.
public struct EntryInfo: Sendable, Equatable {
    public var key: CacheKey
    /// The URL as the user gave it (full query), used for requests.
    public var url: String
    /// The URL that answered after redirects.
    public var finalURL: String
    /// Total length, nil while unknown (chunked response not yet complete).
    public var length: Int64?
    public var contentType: String?
    public var etag: String?
    /// The raw Last-Modified header.
    public var lastModified: String?
    public var acceptsRanges: Bool
    /// Bumped every time the remote file is found to have changed; bytes of different
    /// generations never meet in one read.
    public var generation: Int64
    /// When the origin last confirmed the validators.
    public var validatedAt: Date

    public init(key: CacheKey, url: String, finalURL: String, length: Int64?, contentType: String?,
                etag: String?, lastModified: String?, acceptsRanges: Bool, generation: Int64,
                validatedAt: Date) {
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
    }

    /// Last-Modified parsed as an HTTP-date (for mtime).
    public var lastModifiedDate: Date? { lastModified.flatMap(HTTPDate.parse) }
}
