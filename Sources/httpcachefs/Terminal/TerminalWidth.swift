import Foundation
import Glibc

/// How wide the terminal on standard output is, for tables that fit it (`cache ls`).
///
/// Nil when standard output is not a terminal: a pipe or a file gets the full table, unchanged,
/// so scripts read the same lines whatever window they were started from. On a terminal: its
/// size (`TIOCGWINSZ`), else `$COLUMNS`, else 80.
enum TerminalWidth {
    static func ofStandardOutput() -> Int? {
        guard isatty(1) == 1 else { return nil }
        var size = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        if let text = ProcessInfo.processInfo.environment["COLUMNS"], let n = Int(text), n > 0 { return n }
        return 80
    }
}
