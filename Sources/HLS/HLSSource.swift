import CacheCore
import Foundation

/// Where an HLS preload gets its playlists and resources: the cache of this process
/// (`EngineHLSSource`), or, while a daemon holds the cache, that daemon's proxy (the CLI's).
/// Either way the bytes end up in the one cache that serves the stream afterwards.
public protocol HLSSource: Sendable {
    /// The playlist at `url`, parsed, with its references made absolute (and in the URL space
    /// `readFully` and `playlist` take). Throws `HLSPreloader.PreloadError` when it is no
    /// playlist or too large to parse.
    func playlist(url: String) async throws -> HLSPlaylistInfo

    /// Reads the resource at `url` to its end (the bytes stay in the cache, not in memory):
    /// `length` is called once, when the length is known (nil: the origin did not say), then
    /// `received` once per chunk. Returns the bytes read. Stops when the task is cancelled.
    func readFully(url: String, length: @escaping @Sendable (Int64?) -> Void,
                   received: @escaping @Sendable (Int) -> Void) async throws -> Int64
}

/// Playlists and resources through this process's cache: playlists by `PlaylistLoader` (live
/// ones refreshed), resources by `ChunkedRead`.
public struct EngineHLSSource: HLSSource {
    let engine: CacheEngine
    let loader: PlaylistLoader

    public init(engine: CacheEngine) {
        self.engine = engine
        self.loader = PlaylistLoader(engine: engine)
    }

    public func playlist(url: String) async throws -> HLSPlaylistInfo {
        guard let loaded = try await loader.load(url: url) else { throw HLSPreloader.PreloadError.tooLarge(url) }
        guard let info = loaded.info else { throw HLSPreloader.PreloadError.notAPlaylist(url) }
        return info
    }

    public func readFully(url: String, length: @escaping @Sendable (Int64?) -> Void,
                          received: @escaping @Sendable (Int) -> Void) async throws -> Int64 {
        let entry = try await engine.open(url: url)
        length(entry.length)
        let reader = engine.makeReader(for: entry, background: true)   // a warm-up: after every player's reads
        defer { reader.close() }
        return try await ChunkedRead.run(reader, to: nil) { chunk in
            received(chunk.count)
            return true
        }.bytes
    }
}
