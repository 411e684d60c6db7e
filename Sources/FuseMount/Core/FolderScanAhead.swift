/// Which files of a folder to have the cache load into memory ahead of their opens, when a
/// program opens the folder's files one after the other (`cat *`, a scanner, a backup): past the
/// cache's entry budget (`--entry-memory`) each such open would load its entry from the index
/// on the engine's pool (a hand-off and a wake-up per file); loaded ahead, in one job for many,
/// the open finds it in memory and is answered on the FUSE loop.
///
/// A folder's files get consecutive inode numbers in listing order (the tree numbers a
/// listing's nodes as it adds them), the order `cat *` and most scanners open them in. So an
/// open of inode `n` right after `n - 1`, twice running in the same folder, is a scan; the
/// files up to `window` past it are loaded ahead, and again once the scan is half-way through
/// what was loaded. Any other order asks nothing. Pure: the caller checks that the inodes
/// named are files of that folder.
///
/// Memory: at most `maxFolders` folders followed (more start over), 32 bytes each.
struct FolderScanAhead {
    /// Files loaded ahead of a scan's open.
    static let window: UInt64 = 64
    static let maxFolders = 16

    private struct Scan {
        var last: UInt64
        /// Opens in a row, each the one after the last.
        var streak: Int
        /// The last inode loaded ahead.
        var ahead: UInt64
    }

    private var scans: [UInt64: Scan] = [:]

    /// `ino` of folder `parent` was opened: the inodes to load ahead now, if any.
    mutating func opened(_ ino: UInt64, in parent: UInt64) -> ClosedRange<UInt64>? {
        guard var scan = scans[parent] else {
            if scans.count >= Self.maxFolders { scans.removeAll(keepingCapacity: true) }
            scans[parent] = Scan(last: ino, streak: 0, ahead: ino)
            return nil
        }
        defer { scans[parent] = scan }
        guard ino == scan.last &+ 1 else {
            // Another order, or the same file again: no scan (yet).
            if ino != scan.last { scan = Scan(last: ino, streak: 0, ahead: ino) }
            return nil
        }
        scan.last = ino
        scan.streak += 1
        guard scan.streak >= 2, ino &+ Self.window / 2 >= scan.ahead, ino < UInt64.max - Self.window else { return nil }
        let from = max(scan.ahead, ino) + 1
        scan.ahead = ino + Self.window
        return from...scan.ahead
    }
}
