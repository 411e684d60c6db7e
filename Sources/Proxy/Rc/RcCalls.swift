import CacheCore
import Foundation

/// What the remote-control calls act on, handed in by the daemon: its mountpoints (rclone's
/// "VFSes") and the control hooks the proxy's control requests use (`ControlRequest`).
public struct RcHooks: Sendable {
    /// The daemon's mountpoints: `vfs/list`'s names, and what `fs=` names.
    public var mountpoints: @Sendable () -> [String]
    /// Re-read the listings (and the URL list) of `mountpoint` under `dir` (relative to it):
    /// control `refresh?mount=MOUNTPOINT&path=DIR`; with `recursive`, then read every folder under
    /// it not read yet. 200: done.
    public var refresh: @Sendable (_ mountpoint: String, _ dir: String, _ recursive: Bool) async -> ControlAnswer
    /// Drop the cached copies of these URLs: control `remove` (`cache rm`).
    public var remove: @Sendable (_ urls: [String]) async -> ControlAnswer
    /// The URL the file at `path` (relative) of `mountpoint` shows; nil: no file there.
    public var fileURL: @Sendable (_ mountpoint: String, _ path: String) -> String?
    /// Files open, and entries and directories known, of `mountpoint` (`vfs/stats`).
    public var mountStats: @Sendable (_ mountpoint: String) -> (openFiles: Int, files: Int, dirs: Int)
    /// The cache's use and counters (`vfs/stats`, `core/stats`).
    public var cache: @Sendable () -> (directory: String, usage: CacheUsage, totals: Totals, startedAt: Date)
    public var version: String

    public init(mountpoints: @escaping @Sendable () -> [String],
                refresh: @escaping @Sendable (String, String, Bool) async -> ControlAnswer,
                remove: @escaping @Sendable ([String]) async -> ControlAnswer,
                fileURL: @escaping @Sendable (String, String) -> String?,
                mountStats: @escaping @Sendable (String) -> (openFiles: Int, files: Int, dirs: Int),
                cache: @escaping @Sendable () -> (directory: String, usage: CacheUsage, totals: Totals, startedAt: Date),
                version: String) {
        self.mountpoints = mountpoints
        self.refresh = refresh
        self.remove = remove
        self.fileURL = fileURL
        self.mountStats = mountStats
        self.cache = cache
        self.version = version
    }
}

/// rclone's rc calls where they mean the same here, answered in rclone's shapes:
///
/// - `vfs/refresh` (`dir`, `dir2`..., `recursive`): the listings under each dir are re-read now
///   (`refresh`); `{"result": {"DIR": "OK" | why}}`. Every listing already read under the dir is
///   re-read; with `recursive=true` every folder under it not read yet is read too (the tree is
///   then in memory, as rclone's directory cache is).
/// - `vfs/forget` (`file`..., `dir`...): a file's cached copy is dropped (the next open fetches
///   it anew); a dir's listings are re-read; none: every listing. `{"forgotten": [...]}`.
/// - `vfs/stats`, `vfs/list`, `core/stats`, `core/version`, `rc/noop`, and `job/status`,
///   `job/list` for `_async=true` calls (`RcJobs`).
/// Any other call: rclone's 404 `couldn't find method`. `fs=` names a mountpoint; without it a
/// daemon with one mountpoint uses that one, one with several asks for it, as rclone does.
public enum RcCalls {
    public static let names = ["core/stats", "core/version", "job/list", "job/status", "rc/noop",
                               "vfs/forget", "vfs/list", "vfs/refresh", "vfs/stats"]

    /// The answer to `request` (`_async` already taken out by the caller).
    public static func answer(_ request: RcRequest, hooks: RcHooks, jobs: RcJobs) async -> Result<RcValue, RcFailure> {
        var params = request.params
        // rclone's jobs take these out before the call sees its parameters.
        for k in ["_config", "_filter", "_group"] { params[k] = nil }
        func fail(_ message: String, _ status: Int = 500) -> Result<RcValue, RcFailure> {
            .failure(RcFailure(call: request.call, input: request.params, status: status, message: message))
        }
        switch request.call {
        case "rc/noop":
            return .success(.object(params))
        case "core/version":
            return .success(version(hooks.version))
        case "core/stats":
            let c = hooks.cache()
            return .success(coreStats(totals: c.totals, startedAt: c.startedAt, now: jobs.clock()))
        case "vfs/list":
            return .success(.object(["vfses": .array(hooks.mountpoints().map(RcValue.string))]))
        case "job/list":
            return .success(.object(["jobids": .array(jobs.ids().map { .int($0) })]))
        case "job/status":
            guard let id = params["jobid"]?.int else { return fail("Didn't find key \"jobid\" in input", 400) }
            guard let job = jobs.status(id) else { return fail("job not found") }
            return .success(job)
        case "vfs/refresh", "vfs/forget", "vfs/stats":
            let mountpoint: String
            switch vfs(&params, mountpoints: hooks.mountpoints()) {
            case let .success(m): mountpoint = m
            case let .failure(why): return fail(why.message)
            }
            if request.call == "vfs/stats" {
                guard params.isEmpty else { return fail("invalid parameter: \(params.keys.sorted()[0])") }
                let c = hooks.cache(), m = hooks.mountStats(mountpoint)
                return .success(vfsStats(mountpoint: mountpoint, open: m.openFiles, files: m.files, dirs: m.dirs,
                                         cacheDirectory: c.directory, usage: c.usage))
            }
            if request.call == "vfs/refresh" {
                switch refreshPlan(params) {
                case let .failure(why): return fail(why.message)
                case let .success(plan):
                    var result: [String: RcValue] = [:]
                    for dir in plan.dirs {
                        let answer = await hooks.refresh(mountpoint, trimmed(dir), plan.recursive)
                        result[dir] = .string(answer.status == 200 ? "OK" : oneLine(answer.text))
                    }
                    return .success(.object(["result": .object(result)]))
                }
            }
            switch forgetPlan(params) {
            case let .failure(why): return fail(why.message)
            case let .success(plan):
                var forgotten: [RcValue] = []
                if plan.files.isEmpty && plan.dirs.isEmpty { _ = await hooks.refresh(mountpoint, "", false) }
                let urls = plan.files.compactMap { hooks.fileURL(mountpoint, trimmed($0)) }
                if !urls.isEmpty { _ = await hooks.remove(urls) }
                forgotten += plan.files.map { .string(trimmed($0)) }
                for dir in plan.dirs {
                    _ = await hooks.refresh(mountpoint, trimmed(dir), false)
                    forgotten.append(.string(trimmed(dir)))
                }
                return .success(.object(["forgotten": .array(forgotten)]))
            }
        default:
            return fail("couldn't find method \"\(request.call)\"", 404)
        }
    }

    /// The mountpoint `fs=` names (taken out of `params`), or the only one.
    static func vfs(_ params: inout [String: RcValue], mountpoints: [String]) -> Result<String, RcWhy> {
        guard let given = params.removeValue(forKey: "fs") else {
            if mountpoints.count == 1 { return .success(mountpoints[0]) }
            return .failure(mountpoints.isEmpty ? "no VFS active and \"fs\" parameter not supplied"
                                                : "more than one VFS active - need \"fs\" parameter (one of: \(mountpoints.joined(separator: ", ")))")
        }
        guard let name = given.string else { return .failure("value must be string \"fs\"=\(given.json())") }
        let n = name.count > 1 && name.hasSuffix("/") ? String(name.dropLast()) : name
        guard mountpoints.contains(n) else { return .failure("no VFS found with name \"\(name)\"") }
        return .success(n)
    }

    /// `vfs/refresh`'s dirs in key order (none: the root) and `recursive`; or why not.
    static func refreshPlan(_ params: [String: RcValue]) -> Result<(dirs: [String], recursive: Bool), RcWhy> {
        var params = params
        let recursive = params.removeValue(forKey: "recursive")
        if let recursive, recursive.bool == nil {
            return .failure("invalid value \"recursive\"=\(recursive.json())")
        }
        var dirs: [String] = []
        for key in params.keys.sorted() {
            guard let path = params[key]!.string else { return .failure("value must be string \"\(key)\"=\(params[key]!.json())") }
            guard key.hasPrefix("dir") else { return .failure("unknown key \"\(key)\"") }
            dirs.append(path)
        }
        return .success((dirs.isEmpty ? [""] : dirs, recursive?.bool ?? false))
    }

    /// `vfs/forget`'s files and dirs in key order; or why not.
    static func forgetPlan(_ params: [String: RcValue]) -> Result<(files: [String], dirs: [String]), RcWhy> {
        var files: [String] = [], dirs: [String] = []
        for key in params.keys.sorted() {
            guard let path = params[key]!.string else { return .failure("value must be string \"\(key)\"=\(params[key]!.json())") }
            if key.hasPrefix("file") { files.append(path) } else if key.hasPrefix("dir") { dirs.append(path) } else {
                return .failure("unknown key \"\(key)\"")
            }
        }
        return .success((files, dirs))
    }

    static func trimmed(_ path: String) -> String { path.trimmingCharacters(in: CharacterSet(charactersIn: "/")) }
    static func oneLine(_ text: String) -> String { text.split(separator: "\n").joined(separator: "; ") }

    /// rclone's `core/stats` from the cache's counters: the network side is what came from the
    /// origins; nothing is ever checked, deleted or renamed here.
    static func coreStats(totals: Totals, startedAt: Date, now: Date) -> RcValue {
        let elapsed = max(now.timeIntervalSince(startedAt), 0)
        let requests = totals.originRequests.values.reduce(0, +)
        let failed = totals.failedReads ?? 0
        return .object([
            "bytes": .int(totals.originBytes), "totalBytes": .int(totals.originBytes),
            "checks": .int(0), "totalChecks": .int(0), "deletes": .int(0), "deletedDirs": .int(0), "renames": .int(0),
            "elapsedTime": .double(elapsed), "transferTime": .double(elapsed),
            "errors": .int(failed), "fatalError": .bool(false), "retryError": .bool(failed > 0),
            "eta": .null, "speed": .double(elapsed > 0 ? Double(totals.originBytes) / elapsed : 0),
            "transfers": .int(requests), "totalTransfers": .int(requests),
        ])
    }

    /// rclone's `vfs/stats`: the mountpoint, its open files, what it knows of the tree, and the
    /// disk cache (read-only: nothing is ever uploaded).
    static func vfsStats(mountpoint: String, open: Int, files: Int, dirs: Int, cacheDirectory: String, usage: CacheUsage) -> RcValue {
        .object([
            "fs": .string(mountpoint), "inUse": .int(Int64(open)),
            "metadataCache": .object(["dirs": .int(Int64(dirs)), "files": .int(Int64(files))]),
            "diskCache": .object([
                "path": .string(cacheDirectory), "pathMeta": .string(cacheDirectory),
                "files": .int(Int64(usage.entries)), "bytesUsed": .int(usage.bytes), "maxSize": .int(usage.capacity),
                "erroredFiles": .int(0), "outOfSpace": .bool(false), "uploadsInProgress": .int(0), "uploadsQueued": .int(0),
            ]),
        ])
    }

    /// `core/version`: httpcachefs's own, in rclone's fields.
    static func version(_ version: String) -> RcValue {
        let parts = version.split(separator: ".").map { Int64($0.prefix { $0.isNumber }) ?? 0 }
        #if arch(x86_64)
        let arch = "amd64"
        #elseif arch(arm64)
        let arch = "arm64"
        #else
        let arch = "other"
        #endif
        return .object([
            "version": .string("httpcachefs \(version)"), "decomposed": .array(parts.map(RcValue.int)),
            "isGit": .bool(false), "isBeta": .bool(false), "os": .string("linux"), "arch": .string(arch),
            "goVersion": .string("none (Swift)"), "linking": .string("dynamic"), "goTags": .string("none"),
        ])
    }
}

/// Why a call's parameters are refused: rclone's message.
struct RcWhy: Error, Equatable, ExpressibleByStringInterpolation {
    var message: String
    init(stringLiteral value: String) { message = value }
}
