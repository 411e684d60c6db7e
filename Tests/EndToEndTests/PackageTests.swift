import Foundation
import TestSupport
import XCTest

/// The Debian package as a user meets it: `dpkg -i`, then `mount -t fuse.httpcachefs` from a
/// shell with no Swift on `PATH`, a byte-exact read, `umount`, `dpkg -r`.
///
/// It installs into the system, so it runs only as root with dpkg (as CI does) and says loudly
/// why otherwise. The .deb is `$HTTPCACHEFS_DEB` when set (CI builds it once), else this test
/// builds it with `mount-helpers/build-deb.sh` (minutes: a static release build).
final class PackageTests: XCTestCase {
    static let debEnvironmentVariable = "HTTPCACHEFS_DEB"
    /// What a user's login shell or mount(8) under systemd has: no /opt/swift, no toolchain.
    static let plainEnvironment = ["/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"]

    var origin: OriginServer!
    var temp: TemporaryDirectory!

    override func setUpWithError() throws {
        origin = try OriginServer()
        temp = TemporaryDirectory(prefix: "httpcachefs-deb")
    }

    override func tearDown() {
        origin.stop()
        temp.remove()
    }

    func testTheDebInstallsMountsWithoutSwiftAndRemovesEveryFile() throws {
        try skipUnlessItCanInstallPackages()
        let deb = try debUnderTest()
        let fm = FileManager.default
        let mountpoint = temp.appending("mnt")
        try fm.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        var installed = false
        defer {
            if isMounted(mountpoint) { _ = try? ExternalTool.run("/bin/umount", ["-l", mountpoint]) }
            if installed { _ = try? ExternalTool.run("/usr/bin/dpkg", ["--purge", "httpcachefs"], timeout: 300) }
        }

        var install = try ExternalTool.run("/usr/bin/dpkg", ["-i", deb], timeout: 300)
        installed = true
        if install.status != 0 {
            // Depends not installed yet: apt-get brings them and finishes the configuration.
            print("dpkg -i: \(install.stderr)\nrunning apt-get install -f")
            install = try ExternalTool.run("/usr/bin/env", ["DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-f", "-y", "-qq"],
                                           timeout: 600)
        }
        XCTAssertEqual(install.status, 0, "installing \(deb): \(install.stdout)\(install.stderr)")
        let status = try ExternalTool.run("/usr/bin/dpkg-query", ["-W", "-f=${Status} ${Version}", "httpcachefs"])
        XCTAssertTrue(status.stdout.hasPrefix("install ok installed"), status.stdout)
        let files = try ExternalTool.run("/usr/bin/dpkg", ["-L", "httpcachefs"]).stdout
            .split(separator: "\n").map(String.init)
        for path in ["/usr/bin/httpcachefs", "/sbin/mount.httpcachefs", "/sbin/mount.fuse.httpcachefs",
                     "/lib/systemd/system/httpcachefs@.service", "/usr/share/man/man1/httpcachefs.1.gz",
                     "/usr/share/doc/httpcachefs/copyright", "/usr/bin/httpcachefs-tier",
                     "/usr/share/httpcachefs/tier-nginx.conf.in"] {
            XCTAssertTrue(files.contains(path), "the package has no \(path): \(files)")
        }

        // postinst made the directories root mounts and systemd instances use by default.
        for directory in ["/var/cache/httpcachefs", "/var/log/httpcachefs", "/etc/httpcachefs"] {
            var isDirectory: ObjCBool = false
            XCTAssertTrue(fm.fileExists(atPath: directory, isDirectory: &isDirectory) && isDirectory.boolValue, "postinst made no \(directory)")
        }

        // The binary runs with no Swift anywhere it looks: no toolchain on PATH, no Swift library.
        let version = try plain(["/usr/bin/httpcachefs", "--version"])
        XCTAssertEqual(version.status, 0, version.stderr)
        XCTAssertTrue(status.stdout.hasSuffix(" " + version.stdout.trimmingCharacters(in: .whitespacesAndNewlines)),
                      "package version \(status.stdout), binary --version \(version.stdout)")
        let ldd = try ExternalTool.run("/usr/bin/ldd", ["/usr/bin/httpcachefs"])
        XCTAssertEqual(ldd.status, 0, ldd.stderr)
        for swiftOnly in ["swift", "Foundation", "dispatch", "BlocksRuntime", "not found"] {
            XCTAssertFalse(ldd.stdout.contains(swiftOnly), "the packaged binary loads \(swiftOnly):\n\(ldd.stdout)")
        }
        let man = try plain(["/bin/sh", "-c", "zcat /usr/share/man/man1/httpcachefs.1.gz"])
        XCTAssertTrue(man.stdout.contains(".SH NAME") && man.stdout.contains("httpcachefs mount"), "man page:\n\(man.stdout.prefix(500))")

        // mount(8) finds the packaged helper, which runs the packaged binary.
        let length = 5 << 20 + 17
        origin.setGeneratedFile("/movie.mp4", length: Int64(length), seed: 81)
        let options = "cache_dir=\(temp.appending("cache")),log_file=\(temp.appending("log")),no_proxy"
        let mount = try plain(["/bin/mount", "-t", "fuse.httpcachefs", origin.url("/movie.mp4"), mountpoint, "-o", options])
        XCTAssertEqual(mount.status, 0, "mount: \(mount.stderr)\(mount.stdout)\nlog: \(log())")
        XCTAssertTrue(isMounted(mountpoint), "nothing mounted at \(mountpoint)")
        let bytes = try XCTUnwrap(fm.contents(atPath: mountpoint + "/movie.mp4"), "cannot read the mounted file")
        XCTAssertEqual(bytes.count, length)
        XCTAssertTrue(Array(bytes) == OriginServer.generatedBytes(seed: 81, offset: 0, count: length),
                      "the mounted file's bytes differ from the origin's")
        let daemon = try plain(["/usr/bin/pgrep", "-f", "^/usr/bin/httpcachefs mount .*\(mountpoint)( |$)"])
        let processes = try plain(["/bin/ps", "-eo", "args"]).stdout
        XCTAssertEqual(daemon.status, 0, "the daemon is not the packaged binary: \(processes)")

        let daemonPID = try XCTUnwrap(daemon.stdout.split(separator: "\n").first.flatMap { pid_t($0) }, daemon.stdout)

        let umount = try plain(["/bin/umount", mountpoint])
        XCTAssertEqual(umount.status, 0, umount.stderr)
        // The kernel says when the mount table changes and when the daemon ends.
        XCTAssertTrue(MountTableEvents.wait { !isMounted(mountpoint) }, "the mount is gone")
        XCTAssertTrue(ProcessExit.wait(daemonPID, timeout: 30), "the daemon exits")

        // A daemon not run as a unit (prerm stops those) holding a cache under /var/cache/httpcachefs
        // lives on past `dpkg -r`; a purge must not wipe its cache under it.
        let held = "/var/cache/httpcachefs/package-test-\(getpid())"
        let heldMount = try plain(["/bin/mount", "-t", "fuse.httpcachefs", origin.url("/movie.mp4"), mountpoint, "-o",
                                   "cache_dir=\(held),log_file=\(temp.appending("log2")),no_proxy"])
        XCTAssertEqual(heldMount.status, 0, "mount: \(heldMount.stderr)")
        XCTAssertTrue(isMounted(mountpoint))
        let heldDaemon = try plain(["/usr/bin/pgrep", "-f", "^/usr/bin/httpcachefs mount .*\(mountpoint)( |$)"]).stdout
            .split(separator: "\n").first.flatMap { pid_t($0) }

        let remove = try ExternalTool.run("/usr/bin/dpkg", ["-r", "httpcachefs"], timeout: 300)
        XCTAssertEqual(remove.status, 0, remove.stderr)
        installed = false
        for path in files where path.hasPrefix("/usr/bin/") || path.hasPrefix("/sbin/") || path.contains("httpcachefs") {
            var isDirectory: ObjCBool = false
            guard !(fm.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue) else { continue }
            XCTAssertFalse(fm.fileExists(atPath: path) || (try? fm.destinationOfSymbolicLink(atPath: path)) != nil,
                           "\(path) is still there after dpkg -r")
        }
        XCTAssertNotEqual(try plain(["/bin/sh", "-c", "command -v httpcachefs"]).status, 0, "httpcachefs is still on PATH")

        // A purge refuses while the daemon holds its cache there, and says so.
        let refused = try ExternalTool.run("/usr/bin/dpkg", ["--purge", "httpcachefs"], timeout: 300)
        XCTAssertNotEqual(refused.status, 0, "a purge under a running daemon: \(refused.stdout)\(refused.stderr)")
        XCTAssertTrue(refused.stderr.contains("a running httpcachefs daemon holds a cache there: \(held)"), refused.stderr)
        XCTAssertTrue(fm.fileExists(atPath: held + "/lock"), "the held cache was removed under its daemon")
        installed = true   // its configuration files are left, for the purge below (or the cleanup's)
        XCTAssertEqual(try plain(["/bin/umount", mountpoint]).status, 0)
        XCTAssertTrue(MountTableEvents.wait { !isMounted(mountpoint) }, "the mount is gone")
        if let heldDaemon { XCTAssertTrue(ProcessExit.wait(heldDaemon, timeout: 30), "the daemon exits") }

        // The maintainer scripts keep the package's state until a purge, which takes the caches
        // and logs of root mounts too.
        let purge = try ExternalTool.run("/usr/bin/dpkg", ["--purge", "httpcachefs"], timeout: 300)
        XCTAssertEqual(purge.status, 0, purge.stderr)
        installed = false
        XCTAssertFalse(fm.fileExists(atPath: "/var/cache/httpcachefs"), "dpkg --purge left /var/cache/httpcachefs")
        XCTAssertFalse(try ExternalTool.run("/usr/bin/dpkg-query", ["-W", "-f=${Status}", "httpcachefs"]).stdout.contains("config-files"))
    }

    // MARK: helpers

    func skipUnlessItCanInstallPackages() throws {
        func skip(_ reason: String) throws -> Never {
            print("⚠️  SKIPPING the package test: \(reason)")
            throw XCTSkip(reason)
        }
        guard getuid() == 0 else { try skip("it installs a .deb with dpkg, which needs root (CI runs as root)") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dpkg") else { try skip("no dpkg: not a Debian system") }
        let status = try ExternalTool.run("/usr/bin/dpkg-query", ["-W", "-f=${Status}", "httpcachefs"])
        if status.stdout.contains("ok installed") {
            try skip("an httpcachefs package is installed already; this test would replace and remove it (dpkg -r httpcachefs first)")
        }
    }

    /// `$HTTPCACHEFS_DEB`, or a .deb built now by build-deb.sh (whose last line is its path).
    func debUnderTest() throws -> String {
        if let named = ProcessInfo.processInfo.environment[Self.debEnvironmentVariable], !named.isEmpty {
            guard FileManager.default.fileExists(atPath: named), named.hasSuffix(".deb") else {
                XCTFail("\(Self.debEnvironmentVariable)=\(named) is not a .deb file")
                throw CocoaError(.fileNoSuchFile)
            }
            print("package under test: \(named)")
            return named
        }
        let script = CLITests.repository.appendingPathComponent("mount-helpers/build-deb.sh").path
        print("\(Self.debEnvironmentVariable) is not set: building the package with \(script) (a static release build, minutes)")
        let build = try ExternalTool.run(script, [], timeout: 40 * 60)
        XCTAssertEqual(build.status, 0, "build-deb.sh: \(build.stderr.suffix(4000))")
        let deb = build.stdout.split(separator: "\n").last.map(String.init) ?? ""
        guard build.status == 0, deb.hasSuffix(".deb"), FileManager.default.fileExists(atPath: deb) else {
            XCTFail("build-deb.sh printed no .deb path last: \(build.stdout)")
            throw CocoaError(.fileNoSuchFile)
        }
        print("package under test: \(deb)")
        return deb
    }

    /// `args` run under `env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin`.
    func plain(_ args: [String]) throws -> ExternalTool.Output {
        try ExternalTool.run(Self.plainEnvironment[0], Array(Self.plainEnvironment.dropFirst()) + args, timeout: 60)
    }

    func log() -> String { (try? String(contentsOfFile: temp.appending("log"), encoding: .utf8)) ?? "(no log)" }

}
