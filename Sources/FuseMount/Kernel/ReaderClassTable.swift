import CacheCore
import Foundation
import Glibc

/// Which `ReaderClass` a process falls in, by its name: one table, built in and extended by
/// `--scanner NAME[,NAME…]` and `--background-reader NAME[,NAME…]` (and their config keys). Pure.
///
/// A process is matched by its `comm` (`/proc/PID/comm`, what `ps -o comm` shows: the kernel
/// keeps only its first 15 bytes, so "Plex Media Scanner" runs as "Plex Media Scan") and by
/// the base name of its executable (`/proc/PID/exe`, else `cmdline`'s first word): a name
/// matches either, and a long name matches a `comm` cut to 15 bytes. Threads have names of
/// their own but share the executable's, so both are asked. Names are compared exactly (case
/// and all): `ffprobe` is not `FFprobe`. A name in no list is `.unknown` (it earns read-ahead).
public struct ReaderClassTable: Sendable, Equatable {
    /// Name → class. A name given again takes the class given last.
    public private(set) var classes: [String: ReaderClass]

    /// Media probes (every media server runs one of these per file), players and copies, and
    /// thumbnailers, which read in the background of a scan.
    public static let builtIn = ReaderClassTable(classes: Dictionary(uniqueKeysWithValues:
        ["ffprobe", "mediainfo", "exiftool", "minidlnad", "gerbera", "Plex Media Scanner", "mediascanner"]
            .map { ($0, ReaderClass.scanner) }
        + ["mpv", "vlc", "mplayer", "ffplay", "ffmpeg", "kodi", "kodi.bin", "Plex Transcoder", "totem", "celluloid",
           "cat", "cp", "dd", "rsync", "pv", "tar"]
            .map { ($0, ReaderClass.player) }
        + ["ffmpegthumbnailer", "totem-video-thumbnailer"].map { ($0, ReaderClass.background) }))

    public init(classes: [String: ReaderClass]) { self.classes = classes }

    /// The kernel's limit on `comm`, in bytes.
    static let commBytes = 15

    /// The class of a process named `comm`, running `executable` (a base name; nil when unknown).
    public func classify(comm: String, executable: String?) -> ReaderClass {
        if let c = classes[comm] { return c }
        if let executable, let c = classes[executable] { return c }
        // A name longer than `comm` holds: compare its first 15 bytes.
        if comm.utf8.count == Self.commBytes {
            for (name, c) in classes where name.utf8.count > Self.commBytes && name.utf8.prefix(Self.commBytes).elementsEqual(comm.utf8) {
                return c
            }
        }
        return .unknown
    }

    /// Adds `names` (each a process name, as `--scanner` takes them: comma-separated, spaces
    /// kept inside a name) as `readerClass`. Throws a one-line error naming `option` for a name
    /// that cannot be a process's.
    public mutating func add(_ text: String, as readerClass: ReaderClass, option: String) throws {
        for name in try Self.names(text, option: option) { classes[name] = readerClass }
    }

    /// `ffprobe, Plex Media Scanner` → ["ffprobe", "Plex Media Scanner"].
    public static func names(_ text: String, option: String) throws -> [String] {
        let names = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        for name in names {
            if name.isEmpty {
                throw ReaderClassError("empty process name in '\(text)' for \(option): give names separated by commas, e.g. ffprobe,mediainfo")
            }
            if name.contains("/") {
                throw ReaderClassError("process name '\(name)' for \(option) is a path: give the program's name as `ps -o comm` shows it (e.g. \((name as NSString).lastPathComponent))")
            }
            if name.utf8.count > 255 || name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                throw ReaderClassError("process name '\(name.prefix(40))' for \(option) is not one: at most 255 bytes, no control characters")
            }
        }
        return names
    }
}

/// A reader-class name that cannot be used; its message is the whole one-line error.
public struct ReaderClassError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Reads which process made a request, from /proc: its `comm` and its executable's base name.
/// On the FUSE thread that received the request, once per open (two small reads); a process
/// that is gone or whose /proc we may not read is `.unknown`.
enum ProcessName {
    static func of(pid: Int32) -> (comm: String, executable: String?)? {
        guard pid > 0, let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return nil }
        var exe: String?
        if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe") {
            exe = (target.hasSuffix(" (deleted)") ? String(target.dropLast(10)) : target)
        } else if let cmd = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
                  let first = cmd.split(separator: 0).first {
            exe = String(decoding: first, as: UTF8.self)
        }
        let base = exe.map { ($0 as NSString).lastPathComponent }
        return (comm.trimmingCharacters(in: .newlines), base)
    }
}
