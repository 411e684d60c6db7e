import Foundation

/// An HTTPS door to an `OriginServer`: a private CA, a certificate it signed for 127.0.0.1 and
/// `localhost`, and a TLS relay on loopback that decrypts each connection and passes its bytes to
/// the origin (which logs the requests as usual).
///
/// The origin speaks plain HTTP (SwiftNIO without NIOSSL, a package this project does not pull
/// in), so TLS comes from tools found on every Debian system: `openssl` makes the CA and the
/// certificate, and `python3`'s `ssl` module terminates TLS in a relay of a few lines. The
/// origin's behaviour (ranges, validators, faults) stays exactly what the plain tests see.
/// `init` throws `TLSFront.Unavailable` when a tool is missing: tests skip loudly on it.
public final class TLSFront: @unchecked Sendable {
    /// The CA certificate (PEM) that verifies this front's certificate.
    public let caCertificate: String
    /// The port the relay listens on (127.0.0.1).
    public let port: Int
    private let relay: Process
    private let directory: TemporaryDirectory

    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// Makes the CA and certificate in a temporary directory and starts the relay to `origin`.
    public init(origin: OriginServer) throws {
        let dir = TemporaryDirectory(prefix: "httpcachefs-tls")
        directory = dir
        caCertificate = dir.appending("ca.pem")
        let openssl = ["/usr/bin/openssl", "/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let openssl else { throw Unavailable(description: "openssl is not installed") }
        let ecKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try Self.run(openssl, ["req", "-x509"] + ecKey + ["-keyout", dir.appending("ca.key"), "-out", caCertificate,
                                                          "-days", "2", "-subj", "/CN=httpcachefs test CA"])
        try Self.run(openssl, ["req"] + ecKey + ["-keyout", dir.appending("server.key"), "-out", dir.appending("server.csr"),
                                                 "-subj", "/CN=127.0.0.1"])
        try "subjectAltName = IP:127.0.0.1, DNS:localhost\n".write(toFile: dir.appending("san.ext"), atomically: true, encoding: .utf8)
        try Self.run(openssl, ["x509", "-req", "-in", dir.appending("server.csr"), "-CA", caCertificate,
                               "-CAkey", dir.appending("ca.key"), "-CAcreateserial", "-days", "2",
                               "-extfile", dir.appending("san.ext"), "-out", dir.appending("server.pem")])

        let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let python else { throw Unavailable(description: "python3 is not installed") }
        let out = Pipe()
        relay = Process()
        relay.executableURL = URL(fileURLWithPath: python)
        relay.arguments = ["-c", Self.relayScript, dir.appending("server.pem"), dir.appending("server.key"), String(origin.port)]
        relay.standardOutput = out
        relay.standardError = FileHandle.nullDevice
        try relay.run()
        // The relay prints its port once it listens.
        let line = String(decoding: out.fileHandleForReading.readLine(), as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            relay.terminate()
            throw Unavailable(description: "the python3 TLS relay did not start (said '\(line)')")
        }
        self.port = port
    }

    deinit { stop() }

    /// `https://127.0.0.1:PORT` + path.
    public func url(_ path: String) -> String { "https://127.0.0.1:\(port)\(path)" }

    public func stop() {
        if relay.isRunning {
            relay.terminate()
            relay.waitUntilExit()
        }
    }

    private static func run(_ tool: String, _ arguments: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw Unavailable(description: "\(tool) \(arguments.prefix(2).joined(separator: " ")) failed (status \(p.terminationStatus))")
        }
    }

    /// argv: certificate, key, origin port. One thread per connection, which alone uses its TLS
    /// socket (OpenSSL's objects are not for two threads at once).
    private static let relayScript = """
        import select, socket, ssl, sys, threading
        cert, key, origin = sys.argv[1], sys.argv[2], int(sys.argv[3])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        ctx.set_alpn_protocols(["http/1.1"])
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        print(listener.getsockname()[1], flush=True)
        def serve(raw):
            try:
                tls = ctx.wrap_socket(raw, server_side=True)
            except (OSError, ssl.SSLError):
                raw.close()
                return
            plain = socket.create_connection(("127.0.0.1", origin))
            try:
                while True:
                    ready = [tls] if tls.pending() else select.select([tls, plain], [], [])[0]
                    for s in ready:
                        try:
                            data = s.recv(65536)
                        except ssl.SSLWantReadError:
                            continue
                        if not data:
                            return
                        (plain if s is tls else tls).sendall(data)
            except OSError:
                pass
            finally:
                tls.close()
                plain.close()
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()
        """
}

private extension FileHandle {
    /// Bytes up to the first newline (or EOF).
    func readLine() -> [UInt8] {
        var bytes: [UInt8] = []
        while true {
            let d = readData(ofLength: 1)
            guard let b = d.first, b != 10 else { return bytes }
            bytes.append(b)
        }
    }
}
