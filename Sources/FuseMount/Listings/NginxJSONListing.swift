import CacheCore
import Foundation
import Logging

/// nginx's JSON autoindex (`autoindex_format json`): one array of flat objects,
/// `{"name":"a.mkv","type":"file","mtime":"Thu, 04 Jan 2024 10:00:00 GMT","size":1024}`.
///
/// Decoded by Foundation's `JSONDecoder`, a run of `jsonItemsPerRun` elements at a time
/// (`JSONArrayRuns` finds where the elements end): decoded whole, a listing of a million names
/// took about 300 bytes a name in the decoder's transients, on top of the entries it made and
/// the page itself (issue 51); a run takes what its 4,096 elements take, whatever the
/// listing's length. A document the decoder would refuse whole is refused run by run, with the
/// same error, and a listing past `maxEntries` fails at the first entry too many, not after the
/// whole page was decoded. Runs where `DirectoryListing.parse` runs; blocks on nothing.
extension DirectoryListing {
    /// Elements decoded together: enough that the decoder's fixed cost per call is nothing next
    /// to theirs, few enough that its transients stay around a megabyte.
    static let jsonItemsPerRun = 4096

    struct JSONItem: Decodable {
        var name: String
        var type: String
        var mtime: String?
        var size: Int64?

        /// A size that is no Int64 (too large, fractional, a string) is no size: that entry's
        /// size is then asked on lookup, and the rest of the listing stands.
        init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            name = try c.decode(String.self, forKey: .name)
            type = try c.decode(String.self, forKey: .type)
            mtime = try? c.decodeIfPresent(String.self, forKey: .mtime)
            size = try? c.decodeIfPresent(Int64.self, forKey: .size)
        }

        private enum CodingKeys: String, CodingKey { case name, type, mtime, size }
    }

    /// The entries made of decoded items, in order: files and folders whose names the mount can
    /// show, each name once (the first wins), at most `maxEntries`.
    struct JSONEntries {
        let base: URL
        let logger: Logger
        let maxEntries: Int
        /// The folder's URL that children are spelled under (nil: a base no child can be made
        /// of, and the listing is empty).
        private let prefix: String?
        private(set) var entries: [ListingEntry] = []
        private var seen = Set<EntryName>()

        init(base: URL, logger: Logger, maxEntries: Int) {
            self.base = base
            self.logger = logger
            self.maxEntries = maxEntries
            prefix = DirectoryListing.folderPrefix(base)
        }

        mutating func add(_ item: JSONItem) throws {
            let isDir = item.type == "directory"
            guard item.type == "file" || isDir, isUsable(item.name, in: base, logger: logger),
                  seen.insert(EntryName(item.name)).inserted, let prefix else { return }
            let encoded = item.name.addingPercentEncoding(withAllowedCharacters: pathSegmentAllowed) ?? item.name
            let child = prefix + encoded + (isDir ? "/" : "")
            guard entries.count < maxEntries else { throw ListingError.tooManyEntries(url: base.absoluteString, limit: maxEntries) }
            entries.append(ListingEntry(name: item.name, isDirectory: isDir, url: (try? URLSpelling.normalize(child)) ?? child,
                                        size: isDir ? nil : item.size,
                                        modified: item.mtime.flatMap(parseHTTPDate)))
        }
    }

    /// `itemsPerRun`: elements per decode (tests make it small to cut a listing in many places).
    static func parseNginxJSON(_ bytes: [UInt8], base: URL, logger: Logger, maxEntries: Int = .max,
                               itemsPerRun: Int = jsonItemsPerRun) throws -> [ListingEntry] {
        var made = JSONEntries(base: base, logger: logger, maxEntries: maxEntries)
        let decoder = JSONDecoder()
        do {
            try JSONArrayRuns.forEachRun(bytes, perRun: itemsPerRun) { run in
                // The run's own bytes, not a copy: a hostile page of one huge element costs the
                // run and the decoder, not a third copy.
                let decoded = run.withUnsafeBytes { raw -> [JSONItem]? in
                    guard let start = raw.baseAddress else { return nil }
                    let view = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: start), count: raw.count, deallocator: .none)
                    return try? decoder.decode([JSONItem].self, from: view)
                }
                guard let items = decoded else { throw ListingError.notAListing(url: base.absoluteString) }
                for item in items { try made.add(item) }
            }
        } catch is JSONArrayRuns.Malformed {
            throw ListingError.notAListing(url: base.absoluteString)
        }
        return made.entries
    }
}
