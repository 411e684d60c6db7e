import CacheCore
import Foundation
import FuseMount
import Logging

/// `preload --recursive URL/`: warms a media library. Follows the listings under the URL (HTML,
/// nginx JSON, WebDAV PROPFIND, through `ListingFetch` as the mount reads them), breadth first,
/// within `--max-depth` folders and `--max-files` files (and as many folders), never leaving the URL's path or host;
/// then caches each file's `PreloadPlan` ranges with one progress line for the whole tree.
///
/// Stays within the cap: before each file it adds that file's planned bytes to what this run
/// keeps, and stops with a clear message once that would pass the cap (less the twentieth that
/// eviction keeps free), rather than evicting what it preloaded a moment ago. With `--pin` each
/// file's ranges are pinned before they are fetched, so a refused pin (`--pin-max`) fetches
/// nothing more. Runs on the CLI's tasks; blocking work goes through the target.
///
/// Map of this folder (`Preload/`): what `preload` caches.
/// - `LibraryPreload.swift` (this file): `--recursive` over a library, within the cap.
/// - `PreloadPlan.swift`: which bytes of each file (`--head`, `--tail`, `--range`), pure.
/// Neighbours: run by `Commands/PreloadCommand`; through a daemon by `Daemon/`'s
/// `DaemonPreloadTarget`; lists with FuseMount's `ListingFetch`; progress via `Terminal/`.
struct LibraryPreload {
    struct Limits {
        var maxDepth: Int
        var maxFiles: Int
    }

    struct File: Equatable {
        var url: String
        /// As the listing gave it, if it did.
        var size: Int64?
    }

    struct Tree {
        var files: [File] = []
        var folders = 0
        /// Folders that could not be listed (one line each), and limits reached.
        var problems: [String] = []
        var notes: [String] = []
    }

    /// Where the files go: this process's engine, or the daemon holding the cache.
    protocol Target: Sendable {
        var transport: ListingTransport { get }
        /// The cap the run must stay within.
        var capacity: Int64 { get }
        /// The file's length (nil: the origin gives none), asking as little as possible.
        func length(of file: File) async throws -> Int64?
        /// Bytes of `ranges` the cache holds already.
        func cachedBytes(url: String, in ranges: [Range<Int64>]) -> Int64
        /// Pins `ranges`; returns the bytes the pins keep more than before (whole slices).
        func pin(url: String, ranges: [Range<Int64>], limit: Int64) async throws -> Int64
        /// Caches `range` (an `Int64.max` end: to the end of the file); `progress` gets each chunk's
        /// size. `scanShare`: its slices go to the cap's scan share (`--head`/`--tail`).
        func fetch(url: String, range: Range<Int64>, scanShare: Bool, progress: @escaping @Sendable (Int64) -> Void) async throws
        /// " through the running daemon (process N)", or "".
        var via: String { get }
    }

    struct Outcome {
        var summary: String
        /// Why the run stopped early or what failed, one line each; non-empty means a non-zero exit.
        var problems: [String]
    }

    let root: String
    let plan: PreloadPlan
    let limits: Limits
    /// Pin each file's ranges, within this many bytes in all (nil: no pins).
    let pinLimit: Int64?
    let logger: Logger
    /// `--include`/`--exclude`, with paths from the root folder (`/Films/a.mkv`), as a mount of
    /// that folder would apply them.
    var filter: ListingFilter? = nil

    /// The root as a folder URL (a trailing slash, so relative links resolve inside it).
    static func folderURL(_ url: String) -> String { url.hasSuffix("/") ? url : url + "/" }

    /// Lists the tree under `root`, breadth first. Fails only when the root itself cannot be listed.
    func walk(_ transport: ListingTransport) async throws -> Tree {
        var tree = Tree()
        var queue: [(url: String, depth: Int)] = [(root, 0)]
        var seen: Set<String> = [root]
        var deeperSkipped = 0
        var index = 0
        while index < queue.count {
            let (url, depth) = queue[index]
            index += 1
            let listed: ListingFetch.Listing
            do {
                listed = try await Self.list(url, transport: transport, logger: logger)
            } catch {
                if url == root { throw Failure("cannot list \(DisplayURL.redacted(url)): \(error)") }
                tree.problems.append("cannot list \(DisplayURL.redacted(url)): \(error)")
                continue
            }
            tree.folders += 1
            for entry in listed.entries where entry.url.hasPrefix(root) {
                if let filter {
                    let relative = String(entry.url.dropFirst(root.count))
                    if !filter.allows("/" + (relative.removingPercentEncoding ?? relative), isDirectory: entry.isDirectory) { continue }
                }
                if entry.isDirectory {
                    guard depth + 1 <= limits.maxDepth else { deeperSkipped += 1; continue }
                    // Folders count against --max-files too: a tree of folders without files (a
                    // server whose every folder lists 50 subfolders, a symlink loop with two
                    // links) was listed without end, every URL queued in memory, and nothing
                    // printed until the end that never came.
                    guard queue.count < limits.maxFiles else {
                        tree.notes.append("stopped listing at \(limits.maxFiles) folders (--max-files counts folders too); the rest is not preloaded")
                        return tree
                    }
                    if seen.insert(entry.url).inserted { queue.append((entry.url, depth + 1)) }
                } else if tree.files.count < limits.maxFiles {
                    tree.files.append(File(url: entry.url, size: entry.size))
                } else {
                    tree.notes.append("stopped listing at \(limits.maxFiles) files (--max-files); the rest is not preloaded")
                    return tree
                }
            }
        }
        if deeperSkipped > 0 {
            tree.notes.append("\(deeperSkipped) folder\(deeperSkipped == 1 ? "" : "s") deeper than --max-depth \(limits.maxDepth) not followed")
        }
        return tree
    }

    static func list(_ url: String, transport: ListingTransport, logger: Logger) async throws -> ListingFetch.Listing {
        try await withCheckedThrowingContinuation { continuation in
            ListingFetch.fetch(url: url, through: transport, limit: ListingFetch.limit(listingBudget: MountOptions.defaultListingBudget), maxAge: 0, webDAVFirst: false,
                               timers: Scheduler.shared, logger: logger) { continuation.resume(with: $0) }
        }
    }

    /// Walks the tree and caches every file's ranges.
    func run(into target: Target) async throws -> Outcome {
        let started = Date()
        let tree = try await walk(target.transport)
        var problems = tree.problems
        // The total, if the listing gave every size.
        let knownTotal: Int64? = tree.files.allSatisfy { $0.size != nil }
            ? tree.files.reduce(0) { sum, f in sum + ((try? plan.ranges(length: f.size, url: f.url)).map(PreloadPlan.bytes) ?? 0) }
            : nil
        let bar = ProgressBar.isAvailable ? ProgressBar(label: "", total: knownTotal) : nil
        let progress = Counter()
        let room = target.capacity - target.capacity / 20
        var kept: Int64 = 0, fromCache: Int64 = 0, pinned: Int64 = 0, done = 0
        for (n, file) in tree.files.enumerated() {
            bar?.update(done: progress.value, total: knownTotal, label: "\(n)/\(tree.files.count) files  \(PreloadCommand.shortName(file.url))")
            do {
                let length = try await target.length(of: file)
                let ranges = try plan.ranges(length: length, url: file.url)
                let size = PreloadPlan.bytes(ranges)
                if kept + size > room {
                    problems.append("stopped before \(DisplayURL.redacted(file.url)): with it, this run would keep \(Format.bytes(kept + size)), past the cache cap of \(Format.bytes(target.capacity)) (evicting what it just preloaded); \(done) of \(tree.files.count) files preloaded. Use --head/--tail, or a larger --cache-size")
                    break
                }
                if let pinLimit {
                    do { pinned += try await target.pin(url: file.url, ranges: ranges, limit: pinLimit) } catch {
                        problems.append("stopped before \(DisplayURL.redacted(file.url)): \(error); \(done) of \(tree.files.count) files preloaded")
                        break
                    }
                }
                fromCache += target.cachedBytes(url: file.url, in: ranges)
                for r in ranges {
                    try await target.fetch(url: file.url, range: r, scanShare: plan.fillsScanShare) { progress.add($0) }
                }
                kept += size
                done += 1
            } catch {
                problems.append("\(DisplayURL.redacted(file.url)): \(error)")
            }
        }
        bar?.finish()
        let elapsed = Date().timeIntervalSince(started)
        let bytes = progress.value
        var summary = "preloaded \(DisplayURL.redacted(root)) recursively\(target.via): \(done) of \(tree.files.count) file\(tree.files.count == 1 ? "" : "s") in \(tree.folders) folder\(tree.folders == 1 ? "" : "s") (\(plan.description)), \(bytes) bytes in \(Format.duration(elapsed)) (\(Format.rate(bytes: bytes, seconds: elapsed))), \(fromCache) bytes from cache"
        if pinLimit != nil { summary += ", \(pinned) bytes pinned (whole slices)" }
        for note in tree.notes { summary += "\n  note: \(note)" }
        return Outcome(summary: summary, problems: problems)
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}

/// A byte count added to from fetch threads and read by the progress line.
final class Counter: Sendable {
    private let total = LockedValue<Int64>(0)
    func add(_ n: Int64) { total.withLock { $0 += n } }
    var value: Int64 { total.withLock { $0 } }
}

/// `preload --recursive` into this process's cache.
struct EnginePreloadTarget: LibraryPreload.Target {
    let engine: CacheEngine
    var transport: ListingTransport { EngineBackend(engine: engine) }
    var capacity: Int64 { engine.configuration.capacity }
    var via: String { "" }

    /// A one-byte probe (validators and length), not the usual first 256 KiB: the plan decides.
    func length(of file: LibraryPreload.File) async throws -> Int64? {
        try await engine.open(url: file.url, takeFirstBytes: false).length
    }

    func cachedBytes(url: String, in ranges: [Range<Int64>]) -> Int64 {
        guard let status = engine.status(url: url) else { return 0 }
        return ranges.reduce(0) { $0 + CacheCommand.Export.coveredBytes(status.cachedRanges, within: $1) }
    }

    func pin(url: String, ranges: [Range<Int64>], limit: Int64) async throws -> Int64 {
        let engine = engine
        return try await onBlockingPool { try engine.pin(url: url, ranges: ranges, limit: limit) }
    }

    func fetch(url: String, range: Range<Int64>, scanShare: Bool, progress: @escaping @Sendable (Int64) -> Void) async throws {
        let entry = try await engine.open(url: url, takeFirstBytes: false)
        let end: Int64? = range.upperBound == .max ? nil : range.upperBound
        let reader = engine.makeReader(for: entry, end: end, background: true, scanShare: scanShare)
        defer { reader.close() }
        try await ChunkedRead.run(reader, from: range.lowerBound, to: end, chunkSize: 256 << 10) { bytes in
            progress(Int64(bytes.count))
            return true
        }
    }
}
