import CacheCore
import Foundation
import TerminalText

/// `cache ls` a page at a time: the index read in pages of `pageSize` entries in URL order
/// (`CacheSnapshotPages`), each printed as it arrives, so the first line comes at once and memory
/// holds one page whatever the cache holds. Runs on a blocking-pool thread.
///
/// The table is laid out by its first part (the header and the first page): a cache of up to
/// `pageSize` files prints exactly the table `cache ls` printed whole. Past it, columns keep the
/// first page's widths: on a terminal a longer name is shortened in the middle to that width, as
/// the whole table shortened names to fit; in a pipe, where names are printed whole (for
/// `cache rm`), a longer name pushes the rest of its row.
///
/// The cache is read as `cache ls` read it with a daemon running: the index as last written,
/// without this process opening (and so locking and checking) it, with the live figures of the
/// daemon holding it, when one does and runs a proxy (`DaemonListing`).
enum CacheListStream {
    static let pageSize = 1000

    /// Prints the listing; false (nothing printed) when the index cannot be paged: it does not
    /// exist yet, or an older version last wrote it (opening the cache makes or migrates it).
    static func print(_ options: CacheOptions, pageSize: Int = pageSize) throws -> Bool {
        guard let pages = try CacheSnapshotPages(configuration: try options.configuration()) else { return false }
        let live = DaemonListing.liveFiles(DaemonListing.liveDocument(cacheDirectory: pages.configuration.directory))
        let pinned = pages.pinnedBytes
        let terminal = TerminalWidth.ofStandardOutput()
        let rightAligned = CacheCommand.List.rightAligned(pinned: pinned > 0)
        var widths: [Int]?
        var files = 0
        var bytes: Int64 = 0
        var cursor: CacheSnapshotPages.Cursor?
        repeat {
            let page = try pages.page(after: cursor, limit: pageSize)
            cursor = page.next
            if widths == nil && page.entries.isEmpty {
                CacheCommand.printLine("no cached files (\(pages.configuration.directory))")
                return true
            }
            var rows: [[String]] = widths == nil ? [CacheCommand.List.header(pinned: pinned > 0)] : []
            for e in page.entries {
                let e = live.isEmpty ? e : DaemonListing.overlaid(e, live: live)
                files += 1
                bytes += e.cachedBytes
                rows.append(CacheCommand.List.row(e, terminal: terminal != nil, pinned: pinned > 0 ? pages.pinnedBytes(url: e.info.url) : nil))
            }
            if let widths {
                if terminal != nil {
                    rows = rows.map { row in
                        var row = row
                        row[0] = TextTable.middleTruncated(row[0], to: widths[0])
                        return row
                    }
                }
                if !rows.isEmpty { CacheCommand.printLine(TextTable.table(rows, widths: widths, rightAligned: rightAligned)) }
            } else {
                rows = TextTable.fitted(rows, width: terminal, shrinking: 0)
                let laidOut = TextTable.columnWidths(rows, rows[0].count)
                widths = laidOut
                CacheCommand.printLine(TextTable.table(rows, widths: laidOut, rightAligned: rightAligned))
            }
        } while cursor != nil
        CacheCommand.printLine(CacheCommand.List.footer(usage: CacheUsage(bytes: bytes, capacity: pages.configuration.capacity, entries: files),
                                                        pinned: pinned))
        return true
    }
}
