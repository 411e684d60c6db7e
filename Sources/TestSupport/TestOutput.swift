import Foundation

/// Where tests leave what a person should look at afterwards (screenshots of the status page):
/// `$HTTPCACHEFS_TEST_OUTPUT`, else `$TMPDIR/httpcachefs-test-output` (or under /tmp). Unlike a
/// `TemporaryDirectory`, it is kept; each file is overwritten by the next run of its test.
public enum TestOutput {
    public static var directory: String {
        let env = ProcessInfo.processInfo.environment
        let dir = env["HTTPCACHEFS_TEST_OUTPUT"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((env["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp") + "/httpcachefs-test-output")
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// `directory/name`, printed so the run's log says where to look.
    public static func file(_ name: String) -> String {
        let path = directory + "/" + name
        print("test output: \(path)")
        return path
    }
}
