import Foundation
import Glibc

/// A real S3 server for tests: moto's server mode (`pip install 'moto[server]'`, which
/// `mount-helpers/setup-debian.sh --test` installs), run by a small Python script on a loopback
/// port, with one bucket holding the given objects (uploaded with boto3, signed). The script says
/// `ready KEYID SECRET` on its standard output once the objects are in, so the test waits on that
/// line, never on a timer; `put` replaces an object (a line on its standard input, answered by
/// `done`); closing its standard input (`stop()`) ends it.
///
/// `checkSignatures`: moto checks every request's signature against keys its IAM made (moto's
/// `INITIAL_NO_AUTH_ACTION_COUNT`: the first three requests, which make the user, its keys and
/// its policy, are the only unsigned ones). moto 5.2's check fails signed requests with a query
/// string (ListObjects too, from boto3 itself), so listings are tested without it; objects' GETs
/// (with their ranges) are checked.
public final class MotoS3: @unchecked Sendable {
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    public let port: Int
    public let bucket: String
    public let accessKeyID: String
    public let secretAccessKey: String
    public var endpoint: String { "http://127.0.0.1:\(port)" }
    private let process: Process
    private let input: Pipe
    private let output: Pipe
    private var puts = 0
    private let directory: TemporaryDirectory

    /// moto serving `bucket` with `objects` (key, bytes).
    public init(bucket: String, objects: [(key: String, bytes: [UInt8])], checkSignatures: Bool) throws {
        guard let python = ExternalTool.find("python3") else { throw Unavailable(description: "python3 is not installed") }
        let probe = try ExternalTool.run(python, ["-c", "import moto.server, boto3, flask, werkzeug"], timeout: 60)
        guard probe.status == 0 else {
            throw Unavailable(description: "moto's server mode is not installed (pip install 'moto[server]' boto3; mount-helpers/setup-debian.sh --test): \(probe.stderr.split(separator: "\n").last ?? "")")
        }
        self.bucket = bucket
        directory = TemporaryDirectory(prefix: "httpcachefs-moto")
        let script = directory.appending("moto_s3.py")
        try Self.script.write(toFile: script, atomically: true, encoding: .utf8)
        var arguments = [script, checkSignatures ? "check" : "open", bucket]
        for (i, object) in objects.enumerated() {
            let path = directory.appending("object-\(i)")
            guard FileManager.default.createFile(atPath: path, contents: Data(object.bytes)) else {
                throw Unavailable(description: "cannot write \(path)")
            }
            arguments.append("\(object.key)=\(path)")
        }
        var lastError = ""
        for _ in 0..<3 {
            let port = try LoopbackPort.free()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments = [arguments[0], String(port)] + arguments.dropFirst()
            let input = Pipe(), output = Pipe()
            let log = directory.appending("moto.log")
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            process.standardInput = input
            process.standardOutput = output
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
            try process.run()
            // One line, or the end of the output when the script failed (a port taken meanwhile).
            let line = Self.readLine(output.fileHandleForReading)
            let words = line.split(separator: " ").map(String.init)
            if words.count == 3, words[0] == "ready" {
                self.port = port
                self.process = process
                self.input = input
                self.output = output
                accessKeyID = words[1]
                secretAccessKey = words[2]
                return
            }
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
            lastError = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").suffix(3).joined(separator: " | ")
        }
        directory.remove()
        throw Unavailable(description: "moto did not start: \(lastError)")
    }

    private static func readLine(_ handle: FileHandle) -> String {
        var bytes: [UInt8] = []
        while true {
            let chunk = handle.readData(ofLength: 1)
            guard let b = chunk.first, b != 10 else { break }
            bytes.append(b)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Replaces (or adds) the object `key` with `bytes`; returns once moto has it. One caller at
    /// a time.
    public func put(key: String, bytes: [UInt8]) throws {
        puts += 1
        let path = directory.appending("put-\(puts)")
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else { throw Unavailable(description: "cannot write \(path)") }
        input.fileHandleForWriting.write(Data("put \(key) \(path)\n".utf8))
        let answer = Self.readLine(output.fileHandleForReading)
        guard answer == "done" else { throw Unavailable(description: "moto did not take \(key): \(answer)") }
    }

    /// Ends the server (its standard input closes; the script stops moto and exits).
    public func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        directory.remove()
    }

    static let script = #"""
        import os, sys
        port, mode, bucket, files = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
        if mode == "check":
            os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"   # create_user, create_access_key, put_user_policy
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        import boto3
        from moto.server import ThreadedMotoServer
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        url = "http://127.0.0.1:%d" % port
        keys = {"AccessKeyId": "AKIAIOSFODNN7EXAMPLE", "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
        if mode == "check":
            iam = boto3.client("iam", endpoint_url=url, region_name="us-east-1", aws_access_key_id=keys["AccessKeyId"],
                               aws_secret_access_key=keys["SecretAccessKey"])
            iam.create_user(UserName="tester")
            keys = iam.create_access_key(UserName="tester")["AccessKey"]
            iam.put_user_policy(UserName="tester", PolicyName="s3", PolicyDocument=
                '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}')
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=keys["AccessKeyId"],
                          aws_secret_access_key=keys["SecretAccessKey"])
        s3.create_bucket(Bucket=bucket)
        for item in files:
            name, path = item.split("=", 1)
            with open(path, "rb") as f:
                s3.put_object(Bucket=bucket, Key=name, Body=f.read())
        print("ready", keys["AccessKeyId"], keys["SecretAccessKey"], flush=True)
        for line in sys.stdin:
            command, name, path = line.rstrip("\n").split(" ", 2)
            if command == "put":
                with open(path, "rb") as f:
                    s3.put_object(Bucket=bucket, Key=name, Body=f.read())
            print("done", flush=True)
        server.stop()
        """#
}
