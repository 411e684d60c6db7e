import CacheCore
import Foundation

/// Loads HLS playlists through the cache, honouring live-playlist freshness.
///
/// A VOD playlist (`EXT-X-ENDLIST` or `PLAYLIST-TYPE:VOD`) is an ordinary cached file. A live
/// one changes every target duration, so a copy older than half the target duration
/// (RFC 8216 6.3.4; one second when the playlist names none) is fetched again. The engine has
/// no "open with a maximum age" call yet, so a refresh forgets the entry and opens it again;
/// concurrent refreshes of one playlist are coalesced here so N players cause one origin fetch.
public final class PlaylistLoader: Sendable {
    public struct Loaded: Sendable {
        public var entry: EntryInfo
        public var bytes: [UInt8]
        /// Parsed when the bytes are a playlist; nil for anything else.
        public var info: HLSPlaylistInfo?
        /// True when this load went to the origin because the cached live playlist was too old.
        public var refreshed: Bool
    }

    let engine: CacheEngine
    let maxBytes: Int
    /// The door the playlists are read for, for the cache's counters (the proxy serves them).
    let door: ReadDoor
    private let refreshes = RefreshTable()
    /// The wall clock freshness is judged by: the engine's (`EngineClock`, given by whoever
    /// built it), or a test's own.
    let now: @Sendable () -> Date

    public init(engine: CacheEngine, maxBytes: Int = 8 << 20, door: ReadDoor = .cli,
                now: (@Sendable () -> Date)? = nil) {
        self.door = door
        self.engine = engine
        self.maxBytes = maxBytes
        self.now = now ?? engine.configuration.engineClock.wall
    }

    /// The smallest age at which a live playlist is fetched again.
    public static func refreshAge(_ info: HLSPlaylistInfo) -> TimeInterval {
        guard let td = info.targetDuration, td > 0 else { return 1 }
        return td / 2
    }

    /// Loads `url` (or the already opened `entry`) whole. Returns nil when it is larger than
    /// `maxBytes` (the caller streams it unmodified instead).
    public func load(url: String, entry opened: EntryInfo? = nil) async throws -> Loaded? {
        do {
            return try await loadOnce(url: url, entry: opened)
        } catch CacheError.cancelled, CacheError.storage {
            // Another request refreshed this live playlist (removing the entry) while we read
            // it: the next attempt reads the fresh copy.
            return try await loadOnce(url: url, entry: nil)
        }
    }

    private func loadOnce(url: String, entry opened: EntryInfo?) async throws -> Loaded? {
        var entry: EntryInfo
        if let opened { entry = opened } else { entry = try await engine.open(url: url) }
        guard let first = try await Self.readAll(engine: engine, entry: entry, limit: maxBytes, door: door) else { return nil }
        entry = first.entry
        var loaded = Loaded(entry: entry, bytes: first.bytes, info: Self.parse(first.bytes, entry: entry), refreshed: false)
        if let info = loaded.info, info.isLive,
           now().timeIntervalSince(entry.validatedAt) >= Self.refreshAge(info) {
            let engine = self.engine, maxBytes = self.maxBytes, door = self.door
            let fresh = try await refreshes.run(key: entry.key.string) { () async throws -> ReadResult? in
                // Forget the stale copy, then open again: the origin answers.
                try? await engine.remove(url: url)
                let reopened = try await engine.open(url: url)
                return try await Self.readAll(engine: engine, entry: reopened, limit: maxBytes, door: door)
            }
            guard let fresh else { return nil }
            loaded = Loaded(entry: fresh.entry, bytes: fresh.bytes, info: Self.parse(fresh.bytes, entry: fresh.entry), refreshed: true)
        }
        return loaded
    }

    static func parse(_ bytes: [UInt8], entry: EntryInfo) -> HLSPlaylistInfo? {
        guard HLSPlaylist.isPlaylist(contentType: entry.contentType, firstBytes: Array(bytes.prefix(64))) else { return nil }
        return HLSPlaylistInfo(parsing: String(decoding: bytes, as: UTF8.self), playlistURL: entry.finalURL)
    }

    struct ReadResult: Sendable {
        var entry: EntryInfo
        var bytes: [UInt8]
    }

    /// Reads a whole entry into memory, or nil once it proves longer than `limit`.
    static func readAll(engine: CacheEngine, entry: EntryInfo, limit: Int, door: ReadDoor) async throws -> ReadResult? {
        if let length = entry.length, length > Int64(limit) { return nil }
        let reader = engine.makeReader(for: entry, door: door)
        defer { reader.close() }
        guard let bytes = try await ChunkedRead.readAll(reader, limit: limit) else { return nil }
        return ReadResult(entry: reader.entry, bytes: bytes)
    }
}

/// Single flight for refreshes: callers for a key already being refreshed await that refresh.
actor RefreshTable {
    private var inFlight: [String: Task<PlaylistLoader.ReadResult?, Error>] = [:]

    func run(key: String, _ operation: @escaping @Sendable () async throws -> PlaylistLoader.ReadResult?) async throws
        -> PlaylistLoader.ReadResult? {
        if let task = inFlight[key] { return try await task.value }
        let task = Task { try await operation() }
        inFlight[key] = task
        let result = await task.result
        inFlight[key] = nil
        return try result.get()
    }
}
