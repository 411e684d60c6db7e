import Foundation
import Glibc

/// A real WebDAV server for tests: Debian's nginx with the dav_ext module (PROPFIND, OPTIONS) and
/// autoindex off, so a folder lists by PROPFIND alone, as WebDAV media servers answer. It runs in
/// the foreground (no master process, no daemon) on a loopback port, with its own configuration,
/// pid, temporary directories and logs in a temporary directory; `stop()` ends it by its pid.
///
/// The access log records each request's method, URI, Range header and status (`requests`).
public final class NginxWebDAV: @unchecked Sendable {
    public static let modulePath = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so"

    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    /// One line of the access log.
    public struct Request: Equatable, Sendable {
        public var method: String
        public var uri: String
        /// The Range header, or nil.
        public var range: String?
        public var status: Int
    }

    public let root: String
    public let port: Int
    private let directory: TemporaryDirectory
    private let process: Process

    /// nginx serving `root` (absolute) at `http://127.0.0.1:PORT/`. Throws `Unavailable` when
    /// nginx or the module is not installed (`mount-helpers/setup-debian.sh --test` installs both).
    public init(root: String) throws {
        guard let nginx = ExternalTool.find("nginx") else { throw Unavailable(description: "nginx is not installed") }
        guard FileManager.default.fileExists(atPath: Self.modulePath) else {
            throw Unavailable(description: "the nginx dav_ext module is not installed (libnginx-mod-http-dav-ext)")
        }
        self.root = root
        directory = TemporaryDirectory(prefix: "httpcachefs-nginx")
        var lastError = ""
        for _ in 0..<5 {
            let port = try LoopbackPort.free()
            let conf = directory.appending("nginx.conf")
            try Self.configuration(root: root, port: port, directory: directory.path)
                .write(toFile: conf, atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: nginx)
            process.arguments = ["-p", directory.path, "-c", conf, "-e", directory.appending("error.log")]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            let pidFile = directory.appending("nginx.pid")
            unlink(pidFile)   // a try killed before left its own
            try process.run()
            // Up once it has written its pid file, which nginx does after it bound and listens on
            // its port; gone (a port taken meanwhile) means another try.
            FileEvents.wait(in: directory.path, orExitOf: process.processIdentifier, timeout: 10) {
                FileManager.default.fileExists(atPath: pidFile)
            }
            if process.isRunning, Self.accepts(port: port) {
                self.port = port
                self.process = process
                return
            }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            lastError = (try? String(contentsOfFile: directory.appending("error.log"), encoding: .utf8)) ?? ""
        }
        directory.remove()
        throw Unavailable(description: "nginx did not start: \(lastError)")
    }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// The requests served so far, in order.
    public var requests: [Request] {
        let text = (try? String(contentsOfFile: directory.appending("access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard f.count == 4, let status = Int(f[3]) else { return nil }
            return Request(method: f[0], uri: f[1], range: f[2] == "-" ? nil : f[2], status: status)
        }
    }

    /// The requests served so far, once `condition` holds of them. nginx logs a request once its
    /// answer is sent, which can be after the client has it: inotify on its folder says when it
    /// writes the log (`FileEvents`); `timeout` only bounds a hang. The requests as they stand
    /// then (the caller asserts on them).
    @discardableResult
    public func requests(timeout: TimeInterval = 20, once condition: ([Request]) -> Bool) -> [Request] {
        FileEvents.wait(in: directory.path, timeout: timeout) { condition(requests) }
        return requests
    }

    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        directory.remove()
    }

    static func configuration(root: String, port: Int, directory: String) -> String {
        """
        load_module \(modulePath);
        daemon off;
        master_process off;
        pid \(directory)/nginx.pid;
        error_log \(directory)/error.log warn;
        events { worker_connections 64; }
        http {
            client_body_temp_path \(directory)/body;
            proxy_temp_path \(directory)/proxy;
            fastcgi_temp_path \(directory)/fastcgi;
            uwsgi_temp_path \(directory)/uwsgi;
            scgi_temp_path \(directory)/scgi;
            log_format requests "$request_method\\t$request_uri\\t$http_range\\t$status";
            access_log \(directory)/access.log requests;
            default_type application/octet-stream;
            server {
                listen 127.0.0.1:\(port);
                root \(root);
                autoindex off;
                dav_ext_methods PROPFIND OPTIONS;
                # As WebDAV servers do: every answer says it speaks WebDAV.
                add_header DAV "1,2" always;
            }
        }
        """
    }

    static func accepts(port: Int) -> Bool {
        guard let fd = try? LoopbackPort.connect(port: port) else { return false }
        close(fd)
        return true
    }
}
