import CacheCore
import Foundation
import Glibc
import Logging
import XCTest
@testable import FuseMount
import TestSupport

/// Real FUSE mounts need /dev/fuse and root here; without them the test says so and is skipped.
func requireFuse(file: StaticString = #filePath, line: UInt = #line) throws {
    var reasons: [String] = []
    if access("/dev/fuse", F_OK) != 0 { reasons.append("no /dev/fuse") }
    if geteuid() != 0 { reasons.append("not running as root") }
    if !reasons.isEmpty {
        let message = "SKIPPING real FUSE mount test: \(reasons.joined(separator: ", "))"
        print("⚠️  \(message)")
        throw XCTSkip(message, file: file, line: line)
    }
}

/// A real in-process FUSE mount on a fresh temporary directory; `stop()` unmounts it.
final class InProcessMount: Sendable {
    let mountpoint: String
    let fs: FuseFileSystem

    init(backend: MountBackend, tree: MountTreeSpec, options: MountOptions = MountOptions(),
         logLevel: Logger.Level = ProcessInfo.processInfo.environment["FUSE_TEST_LOG"] != nil ? .debug : .critical) throws {
        try requireFuse()
        mountpoint = NSTemporaryDirectory() + "httpcachefs-mnt-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        var logger = Logger(label: "test.fuse")
        logger.logLevel = logLevel
        fs = FuseFileSystem(backend: backend, tree: tree, options: options, clock: .realTime, logger: logger)
        try fs.start(at: mountpoint)
    }

    func path(_ rel: String) -> String { mountpoint + "/" + rel }

    func stop() {
        if fs.isRunning {
            fs.unmount()
            fs.wait()
        }
        rmdir(mountpoint)
    }

    deinit { stop() }
}

/// POSIX file access with errno, for tests that check exact errors.
enum POSIX {
    struct Failure: Error, Equatable, CustomStringConvertible {
        var errno: Int32
        var description: String { "\(String(cString: strerror(errno))) (errno \(errno))" }
    }

    static func readAll(_ path: String, chunk: Int = 1 << 20) throws -> [UInt8] {
        let fd = Glibc.open(path, O_RDONLY)
        guard fd >= 0 else { throw Failure(errno: errno) }
        defer { close(fd) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: chunk)
        while true {
            let n = read(fd, &buf, chunk)
            if n < 0 { throw Failure(errno: errno) }
            if n == 0 { return out }
            out += buf[0..<n]
        }
    }

    static func pread(_ fd: Int32, offset: Int64, count: Int) throws -> [UInt8] {
        var buf = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = buf.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress! + got, count - got, off_t(offset) + off_t(got)) }
            if n < 0 { throw Failure(errno: errno) }
            if n == 0 { break }
            got += n
        }
        return Array(buf[0..<got])
    }

    static func open(_ path: String, _ flags: Int32 = O_RDONLY) throws -> Int32 {
        let fd = Glibc.open(path, flags, 0o644)
        guard fd >= 0 else { throw Failure(errno: errno) }
        return fd
    }

    static func stat(_ path: String) throws -> Glibc.stat {
        var st = Glibc.stat()
        guard Glibc.lstat(path, &st) == Int32(0) else { throw Failure(errno: errno) }
        return st
    }

    static func errnoOf(_ body: () throws -> Void) -> Int32? {
        do { try body(); return nil } catch let f as Failure { return f.errno } catch { return -1 }
    }

    static func list(_ path: String) throws -> [String] {
        guard let d = opendir(path) else { throw Failure(errno: errno) }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafePointer(to: e.pointee.d_name) { $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) } }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }
}
