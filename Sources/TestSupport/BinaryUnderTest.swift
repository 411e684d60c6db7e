import Foundation

/// The `httpcachefs` executable that tests run as a subprocess.
///
/// `$HTTPCACHEFS_BINARY` names it when set: CI builds a release binary and runs the end-to-end
/// tests against it, because some bugs (an optimizer miscompile, a lifetime that ends earlier
/// under -O) exist only there. A set variable is a promise: if it names no executable, that is an
/// error, never a silent fallback to the debug build. Unset, it is the `httpcachefs` that
/// `swift test` built next to the test bundle, else the newest `.build*/debug/httpcachefs` of
/// this checkout.
public enum BinaryUnderTest {
    public static let environmentVariable = "HTTPCACHEFS_BINARY"

    public struct NotFound: Error, CustomStringConvertible {
        /// True when `$HTTPCACHEFS_BINARY` was set (a broken setup, not a missing build).
        public var wasNamed: Bool
        public var description: String
    }

    /// The path, or why there is none. Announced once per process on stdout, so a test log
    /// shows which build was tested.
    public static func locate() throws -> String {
        try located.get()
    }

    private static let located: Result<String, NotFound> = {
        let result = search()
        if case let .success(path) = result { print("httpcachefs under test: \(path)") }
        return result
    }()

    private static func search() -> Result<String, NotFound> {
        let fm = FileManager.default
        if let named = ProcessInfo.processInfo.environment[environmentVariable], !named.isEmpty {
            let path = URL(fileURLWithPath: named).standardizedFileURL.path
            guard fm.isExecutableFile(atPath: path) else {
                return .failure(NotFound(wasNamed: true, description: "\(environmentVariable)=\(named) is not an executable file"))
            }
            return .success(path)
        }
        var candidates: [String] = []
        let running = [Bundle.main.executablePath, CommandLine.arguments.first,
                       try? fm.destinationOfSymbolicLink(atPath: "/proc/self/exe")].compactMap { $0 }
        for base in running {
            var dir = URL(fileURLWithPath: base).deletingLastPathComponent()
            for _ in 0..<3 {
                candidates.append(dir.appendingPathComponent("httpcachefs").path)
                dir = dir.deletingLastPathComponent()
            }
        }
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let builds = ((try? fm.contentsOfDirectory(atPath: repo.path)) ?? []).filter { $0.hasPrefix(".build") }
        candidates += builds.map { repo.appendingPathComponent($0).appendingPathComponent("debug/httpcachefs").path }
            .filter { fm.isExecutableFile(atPath: $0) }
            .sorted { modificationDate($0) > modificationDate($1) }
        if let found = candidates.first(where: { fm.isExecutableFile(atPath: $0) }) { return .success(found) }
        return .failure(NotFound(wasNamed: false, description:
            "no httpcachefs binary found next to the tests or in .build*/debug (build it: swift build --product httpcachefs, or set \(environmentVariable))"))
    }

    private static func modificationDate(_ path: String) -> Date {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date) ?? .distantPast
    }
}
