import CacheCore
import Foundation

/// What a control request asks of the daemon (`POST /.httpcachefs/control/ACTION`).
public enum ControlRequest: Equatable, Sendable {
    /// Re-read the listings (and the URL list) under this path inside the mount; nil: all.
    case refresh(path: String?)
    /// `cache rm`: forget these URLs.
    case remove(urls: [String])
    /// `cache clear`.
    case clear
    /// `preload --pin`: pin these half-open ranges of `url`, within `limit` bytes pinned in all.
    case pin(url: String, ranges: [Range<Int64>], limit: Int64)
    /// `cache unpin`: unpin these URLs.
    case unpin(urls: [String])
    /// The daemon's mountpoints (`mount` adding one, `unmount` detaching one, `refresh` of one
    /// named by `mount=`): carried to the owner's `mounts` handler as the action and its query.
    case mounts(action: String, query: [URLQueryItem])

    public static let pathPrefix = "/.httpcachefs/control/"
    public static let keyHeader = "X-Httpcachefs-Control"
}

/// The answer to a control request: an HTTP status and plain text, one item a line.
public struct ControlAnswer: Sendable, Equatable {
    public var status: Int
    public var text: String
    public init(status: Int, text: String) {
        self.status = status
        self.text = text
    }
}

extension ProxyService {
    /// Carries out `request`; `completion` runs on some other thread. Removals, pins and clears
    /// commit to the index and delete files: they run as jobs of the engine's pool for blocking
    /// I/O (`CacheEngine.runBlocking`), never on the event loop.
    func control(_ request: ControlRequest, completion: @escaping @Sendable (ControlAnswer) -> Void) {
        let engine = self.engine
        switch request {
        case let .refresh(path):
            guard let refresh else {
                return completion(ControlAnswer(status: 404, text: "this daemon runs no mount: there are no listings to refresh"))
            }
            Task { completion(await refresh(path)) }
        case let .remove(urls):
            // Machine-readable lines, tab-separated: the command renders them.
            engine.runBlocking {
                var lines: [String] = []
                for url in urls {
                    // Its entry by this daemon's key, else its entries under every credential
                    // (`CacheEngine.statuses`: a bucket no mount of it reads any more).
                    let found = engine.statuses(url: url)
                    guard !found.isEmpty else {
                        lines.append("missing\t\(url)")
                        continue
                    }
                    do {
                        for status in found { try engine.remove(key: status.info.key) }
                        lines.append("removed\t\(found.reduce(0) { $0 + $1.cachedBytes })\t\(url)")
                    } catch {
                        lines.append("failed\t\(url)\t\(error)")
                    }
                }
                completion(ControlAnswer(status: 200, text: lines.joined(separator: "\n")))
            }
        case let .pin(url, ranges, limit):
            engine.runBlocking {
                do {
                    let added = try engine.pin(url: url, ranges: ranges, limit: limit)
                    completion(ControlAnswer(status: 200, text: "pinned\t\(added)\t\(engine.pinnedBytes)"))
                } catch let refusal as PinRefusal {
                    completion(ControlAnswer(status: 409, text: "\(refusal)"))
                } catch {
                    completion(ControlAnswer(status: 500, text: "\(error)"))
                }
            }
        case let .unpin(urls):
            engine.runBlocking {
                var lines: [String] = []
                for url in urls {
                    do { lines.append("unpinned\t\(try engine.unpin(url: url))\t\(url)") } catch {
                        lines.append("failed\t\(url)\t\(error)")
                    }
                }
                completion(ControlAnswer(status: 200, text: lines.joined(separator: "\n")))
            }
        case .clear:
            engine.runBlocking {
                let before = engine.usage
                do {
                    try engine.clear()
                    completion(ControlAnswer(status: 200, text: "cleared\t\(before.entries)\t\(before.bytes)"))
                } catch {
                    completion(ControlAnswer(status: 500, text: "\(error)"))
                }
            }
        case let .mounts(action, query):
            guard let mounts else {
                return completion(ControlAnswer(status: 404, text: "this daemon takes no mounts (it is 'httpcachefs proxy', or an older version)"))
            }
            Task { completion(await mounts(action, query)) }
        }
    }
}
