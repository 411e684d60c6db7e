import CacheCore
import Foundation

/// Fills the cache with everything an HLS stream needs: master → chosen variants (and the audio,
/// video and subtitle renditions they reference) → media playlists → segments, init sections and
/// keys, each read fully from an `HLSSource` (the cache itself, or the proxy of the daemon that
/// holds it), so the proxy and the mount then serve the whole stream from disk.
///
/// A resource that fails (a 404 segment) is recorded and the rest continue; only a top playlist
/// that cannot be loaded is an error. Memory stays bounded: bytes are read in chunks and
/// dropped, the engine keeps them on disk.
public struct HLSPreloader: Sendable {
    /// Which variant streams of a master playlist to fetch.
    public enum VariantChoice: Sendable, Equatable, CustomStringConvertible {
        /// The highest BANDWIDTH.
        case best
        /// Every variant and every rendition.
        case all
        /// The variant with exactly this BANDWIDTH; else the highest below it; else the lowest.
        case bandwidth(Int)

        /// Parses `best`, `all` or a number.
        public init?(argument: String) {
            switch argument.lowercased() {
            case "best": self = .best
            case "all": self = .all
            default:
                guard let n = Int(argument), n >= 0 else { return nil }
                self = .bandwidth(n)
            }
        }

        public var description: String {
            switch self {
            case .best: return "best"
            case .all: return "all"
            case let .bandwidth(n): return String(n)
            }
        }
    }

    public struct Failure: Sendable, Equatable {
        public var url: String
        public var error: String
    }

    public struct Report: Sendable, Equatable {
        /// Playlists loaded (master and media).
        public var playlists: Int = 0
        /// Segments, init sections and keys read fully.
        public var resources: Int = 0
        /// Bytes of resources read (cache hits included).
        public var bytes: Int64 = 0
        public var failures: [Failure] = []
    }

    public enum PreloadError: Error, CustomStringConvertible {
        case notAPlaylist(String)
        case tooLarge(String)

        public var description: String {
            switch self {
            case let .notAPlaylist(url): return "not an HLS playlist: \(url)"
            case let .tooLarge(url): return "playlist too large to parse: \(url)"
            }
        }
    }

    /// `(doneBytes, totalBytesKnown, currentURL)`: totalBytesKnown grows as resources are
    /// opened (their lengths become known); it is not a promise about the end.
    public typealias Progress = @Sendable (Int64, Int64, String) -> Void

    let source: HLSSource
    let variant: VariantChoice
    let concurrency: Int

    public init(source: HLSSource, variant: VariantChoice = .best, concurrency: Int = 2) {
        self.source = source
        self.variant = variant
        self.concurrency = max(1, concurrency)
    }

    /// Preloads into `engine`, the cache of this process.
    public init(engine: CacheEngine, variant: VariantChoice = .best, concurrency: Int = 2) {
        self.init(source: EngineHLSSource(engine: engine), variant: variant, concurrency: concurrency)
    }

    public func run(playlistURL: String, progress: @escaping Progress = { _, _, _ in }) async throws -> Report {
        var report = Report()
        let topInfo = try await source.playlist(url: playlistURL)
        report.playlists = 1

        var media: [HLSPlaylistInfo] = []
        if topInfo.isMaster {
            for url in Self.mediaPlaylists(of: topInfo, choice: variant) {
                try Task.checkCancellation()
                progress(0, 0, url)
                do {
                    media.append(try await source.playlist(url: url))
                    report.playlists += 1
                } catch {
                    report.failures.append(Failure(url: url, error: "\(error)"))
                }
            }
        } else {
            media = [topInfo]
        }

        var seen = Set<String>()
        let resources = media.flatMap(\.resources).filter { seen.insert($0).inserted }
        let outcome = try await fetchAll(resources, progress: progress)
        report.resources = outcome.done
        report.bytes = outcome.bytes
        report.failures += outcome.failures
        return report
    }

    /// The media playlists to follow for a master playlist, in order, each once.
    public static func mediaPlaylists(of master: HLSPlaylistInfo, choice: VariantChoice) -> [String] {
        let chosen: [HLSPlaylistInfo.Variant]
        switch choice {
        case .all:
            chosen = master.variants
        case .best:
            chosen = master.variants.max { ($0.bandwidth ?? 0) < ($1.bandwidth ?? 0) }.map { [$0] } ?? []
        case let .bandwidth(n):
            if let exact = master.variants.first(where: { $0.bandwidth == n }) {
                chosen = [exact]
            } else if let below = master.variants.filter({ ($0.bandwidth ?? 0) <= n })
                .max(by: { ($0.bandwidth ?? 0) < ($1.bandwidth ?? 0) }) {
                chosen = [below]
            } else {
                chosen = master.variants.min { ($0.bandwidth ?? 0) < ($1.bandwidth ?? 0) }.map { [$0] } ?? []
            }
        }
        let groups = Set(chosen.flatMap { [$0.audioGroup, $0.videoGroup, $0.subtitlesGroup].compactMap { $0 } })
        let renditions = master.renditions.filter { choice == .all || groups.contains($0.groupID) }
        var seen = Set<String>()
        return (chosen.map(\.url) + renditions.map(\.url)).filter { seen.insert($0).inserted }
    }

    private struct Outcome {
        var done = 0
        var bytes: Int64 = 0
        var failures: [Failure] = []
    }

    /// Reads every resource fully, `concurrency` at a time.
    private func fetchAll(_ urls: [String], progress: @escaping Progress) async throws -> Outcome {
        let counters = ProgressCounters()
        var outcome = Outcome()
        try await withThrowingTaskGroup(of: (String, Result<Int64, Error>).self) { group in
            var next = 0
            func addNext() {
                guard next < urls.count else { return }
                let url = urls[next]
                next += 1
                group.addTask { [source] in
                    await Self.fetchOne(source: source, url: url, counters: counters, progress: progress)
                }
            }
            for _ in 0..<concurrency { addNext() }
            while let (url, result) = try await group.next() {
                try Task.checkCancellation()
                switch result {
                case let .success(n):
                    outcome.done += 1
                    outcome.bytes += n
                case let .failure(error):
                    if error is CancellationError { throw error }
                    outcome.failures.append(Failure(url: url, error: "\(error)"))
                }
                addNext()
            }
        }
        return outcome
    }

    /// One resource read fully, its failure a value: a bad segment does not end the group.
    ///
    /// The byte count is bound before the result is built, on purpose. Swift 6.3.1 at -O
    /// miscompiles a non-throwing `addTask` closure of a throwing task group that returns
    /// `(url, .success(try await …))` from a `do` block: `group.next()` then yields nothing or
    /// garbage (release-only "0 segments" or a crash in the task group). So no `try await` may
    /// sit inside the expression a child task returns.
    private static func fetchOne(source: HLSSource, url: String, counters: ProgressCounters,
                                 progress: @escaping Progress) async -> (String, Result<Int64, Error>) {
        do {
            let bytes = try await readFully(source: source, url: url, counters: counters, progress: progress)
            return (url, .success(bytes))
        } catch {
            return (url, .failure(error))
        }
    }

    private static func readFully(source: HLSSource, url: String, counters: ProgressCounters,
                                  progress: @escaping Progress) async throws -> Int64 {
        let lengthKnown = LengthSeen()
        return try await source.readFully(url: url, length: { length in
            lengthKnown.set(length != nil)
            _ = counters.addKnown(length ?? 0)
        }, received: { count in
            if !lengthKnown.value { _ = counters.addKnown(Int64(count)) }
            let (done, known) = counters.addDone(Int64(count))
            progress(done, max(known, done), url)
        })
    }
}

/// Whether a resource's length was known when it was opened (else its chunks grow the total).
private final class LengthSeen: Sendable {
    private let known = LockedValue(false)
    var value: Bool { known.withLock { $0 } }
    func set(_ v: Bool) { known.withLock { $0 = v } }
}

/// Byte counters shared by the concurrent readers of one preload. A pthread lock
/// (`LockedValue`), not `Synchronization.Mutex`: on Linux that one waits on raw futexes, which
/// ThreadSanitizer does not see, so it reported every use as a race.
final class ProgressCounters: Sendable {
    private let counts = LockedValue<(done: Int64, known: Int64)>((0, 0))

    func addDone(_ n: Int64) -> (done: Int64, known: Int64) {
        counts.withLock { $0.done += n; return $0 }
    }

    func addKnown(_ n: Int64) -> Int64 {
        counts.withLock { $0.known += n; return $0.known }
    }
}
