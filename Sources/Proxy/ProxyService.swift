import CacheCore
import Foundation
import HLS
import Logging

/// Turns a proxied URL and the request's conditions into what to send: a plan over the cached
/// entry (media, streamed through a `CacheReader`), or over a rewritten playlist held in memory.
///
/// Shared by every connection of one server; everything here is thread-safe.
final class ProxyService: Sendable {
    let engine: CacheEngine
    let configuration: ProxyConfiguration
    let router: ProxyRouter
    let loader: PlaylistLoader
    /// Playlist rewrites under way at once (`AsyncGate`).
    let rewrites = AsyncGate(limit: 2)
    let logger: Logger
    /// The `/metrics` text, from whoever owns the metrics backend; nil when there is none.
    let metricsText: (@Sendable () -> String)?
    /// The mount's listing refresh, if a mount runs alongside.
    let refresh: (@Sendable (String?) async -> ControlAnswer)?
    /// The mounts' control (`ControlRequest.mounts`), if the daemon serves mounts.
    let mounts: (@Sendable (String, [URLQueryItem]) async -> ControlAnswer)?

    init(engine: CacheEngine, configuration: ProxyConfiguration, logger: Logger,
         metricsText: (@Sendable () -> String)? = nil, refresh: (@Sendable (String?) async -> ControlAnswer)? = nil,
         mounts: (@Sendable (String, [URLQueryItem]) async -> ControlAnswer)? = nil) {
        self.metricsText = metricsText
        self.refresh = refresh
        self.mounts = mounts
        self.engine = engine
        self.configuration = configuration
        self.router = ProxyRouter(configuration: configuration)
        self.loader = PlaylistLoader(engine: engine, maxBytes: configuration.maxPlaylistBytes, door: .proxy)
        self.logger = logger
    }

    enum Prepared: Sendable {
        /// Serve `plan` over the cached entry.
        case entry(EntryInfo, ResponsePlan)
        /// Serve `plan` over these bytes (a rewritten playlist).
        case memory([UInt8], ResponsePlan)
    }

    /// Opens `url` and plans the answer. `completion` runs on the caller's thread before this
    /// returns when the entry is fresh and is not a playlist candidate (the common case: no
    /// origin request, no task), else later on an engine or pool thread.
    /// - Parameters:
    ///   - isHead: a HEAD request: the origin is asked for metadata, not for a body.
    ///   - exactRange: fetch no bytes beyond those asked (`ProxyURL.exactRangeHeader`).
    func prepare(url: String, conditions: RequestConditions, isHead: Bool = false, exactRange: Bool = false,
                 completion: @escaping @Sendable (Result<Prepared, CacheError>) -> Void) {
        engine.open(url: url, takeFirstBytes: !isHead && !exactRange, answerFreshInline: true) { [self] result in
            switch result {
            case let .failure(error):
                completion(.failure(error))
            case let .success(entry):
                // The playlist rule (`HLSPlaylist.candidacy`): only a candidate costs a task.
                guard HLSPlaylist.candidacy(of: entry) != .no else {
                    completion(.success(.entry(entry, plan(entry: entry, conditions))))
                    return
                }
                Task {
                    do {
                        completion(.success(try await self.preparePlaylist(url: url, entry: entry, conditions)))
                    } catch let error as CacheError {
                        completion(.failure(error))
                    } catch {
                        completion(.failure(.badResponse(url: url, message: "\(error)")))
                    }
                }
            }
        }
    }

    func plan(entry: EntryInfo, _ conditions: RequestConditions) -> ResponsePlan {
        let rep = Representation(length: entry.length,
                                 contentType: MediaTypes.contentType(origin: entry.contentType, url: entry.url),
                                 etag: entry.etag, lastModified: entry.lastModified)
        return ResponsePlanner.plan(rep, conditions, boundary: Self.makeBoundary())
    }

    private func preparePlaylist(url: String, entry: EntryInfo, _ conditions: RequestConditions) async throws -> Prepared {
        // The first bytes only, when the type does not say (already on disk from the engine's
        // open probe), so a small media file costs no extra download, not even for HEAD.
        guard try await HLSPlaylist.isPlaylist(engine: engine, entry: entry) else {
            return .entry(entry, plan(entry: entry, conditions))
        }
        guard let loaded = try await loader.load(url: url, entry: entry) else {
            logger.warning("playlist too large to rewrite; passed through", metadata: ["url": "\(url)"])
            return .entry(entry, plan(entry: entry, conditions))
        }
        guard let info = loaded.info else {
            // Sniffed and not a playlist: an ordinary small file.
            return .entry(loaded.entry, plan(entry: loaded.entry, conditions))
        }
        let (token, key) = (configuration.token, configuration.signingKey)
        let body = await rewrites.run { [bytes = loaded.bytes, finalURL = loaded.entry.finalURL] in
            let rewritten = HLSPlaylist.rewrite(String(decoding: bytes, as: UTF8.self), playlistURL: finalURL) {
                ProxyURL.make(original: $0, base: "", token: token, key: key)
            }
            return Array(rewritten.utf8)
        }
        let contentType = HLSPlaylist.isPlaylistContentType(loaded.entry.contentType)
            ? loaded.entry.contentType! : "application/vnd.apple.mpegurl"
        // The rewritten body is not the origin's: its validators would lie, so none are sent.
        var plan = ResponsePlanner.plan(Representation(length: Int64(body.count), contentType: contentType),
                                        conditions, boundary: Self.makeBoundary())
        if info.isLive {
            // Players must come back for the next version, and so must any cache in between.
            plan.headers.append(("Cache-Control", "no-cache"))
        }
        if loaded.refreshed {
            logger.debug("live playlist refreshed", metadata: ["url": "\(url)"])
        }
        return .memory(body, plan)
    }

    static func makeBoundary() -> String {
        "httpcachefs-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    }
}
