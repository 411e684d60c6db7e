import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
/// Chromium reads commands on fd 3 and writes answers and events on fd 4, each a JSON object
/// ended by a NUL byte), so the benchmark can ask a page when it finished drawing, in real time.
///
/// Why not `--dump-dom --virtual-time-budget`: under virtual time the page's clock is virtual
/// (it jumps while the page is idle), so the page cannot time itself, and the wall time of the
/// whole run is mostly Chromium's own start, from which the page's share must be subtracted.
/// Here one browser is started once, a page is opened in it, and the page's own mark is read:
/// `data-first-draw-ms` on `<body>`, `performance.now()` when its script has drawn the first
/// poll's answer (the HTML loaded, the summary and any open folder's page fetched, the DOM built,
/// and a layout forced by its width check), counted from the navigation's start.
///
/// Runs on the caller's thread; every read waits at most `timeout`.
final class ChromiumPage {
    private let pid: pid_t
    private let commands: Int32
    private let answers: Int32
    private var buffer: [UInt8] = []
    private var nextID = 1
    private var session: String
    let timeout: Double

    /// Starts Chromium (`executable`) with a window of `width`×`height` and a profile in
    /// `profile`, and opens one blank page in it.
    init(executable: String, profile: String, width: Int, height: Int, timeout: Double = 120) throws {
        self.timeout = timeout
        func pipeAbove10() throws -> (Int32, Int32) {
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw ValidationError("pipe: \(String(cString: strerror(errno)))") }
            // Above the descriptors the child gets (3, 4), so the dup2s below cannot clobber one.
            let r = fcntl(fds[0], F_DUPFD_CLOEXEC, 10), w = fcntl(fds[1], F_DUPFD_CLOEXEC, 10)
            Glibc.close(fds[0]); Glibc.close(fds[1])
            return (r, w)
        }
        let toChromium = try pipeAbove10(), fromChromium = try pipeAbove10()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, toChromium.0, 3)
        posix_spawn_file_actions_adddup2(&actions, fromChromium.1, 4)
        let args = [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe",
                    "--user-data-dir=\(profile)", "--window-size=\(width),\(height)", "about:blank"]
        let argv = args.map { strdup($0) } + [nil]
        let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, nil, argv, envp)
        Glibc.close(toChromium.0)
        Glibc.close(fromChromium.1)
        guard rc == 0 else {
            Glibc.close(toChromium.1); Glibc.close(fromChromium.0)
            throw ValidationError("cannot run \(executable): \(String(cString: strerror(rc)))")
        }
        pid = child
        commands = toChromium.1
        answers = fromChromium.0
        session = ""
        do {
            let target = try call("Target.createTarget", ["url": "about:blank"], session: nil)
            guard let id = target["targetId"] as? String else { throw ValidationError("chromium: createTarget answered \(target)") }
            let attached = try call("Target.attachToTarget", ["targetId": id, "flatten": true], session: nil)
            guard let s = attached["sessionId"] as? String else { throw ValidationError("chromium: attachToTarget answered \(attached)") }
            session = s
        } catch {
            quit()
            throw error
        }
    }

    /// What a page said of its first drawing.
    struct Drawn {
        /// The page's own `data-first-draw-ms`: from the navigation's start to the end of its
        /// first full drawing, by its clock.
        var pageMilliseconds: Double
        /// From sending the navigation to seeing the mark (includes this side's polling, 5 ms).
        var wallSeconds: Double
        /// `document.body.dataset` then, for checks.
        var dataset: [String: String]
        var folderRows: Int
        var fileRows: Int
    }

    /// Navigates to `url` and waits until its `<body>` carries `data-first-draw-ms`.
    func draw(_ url: String) throws -> Drawn {
        let began = DispatchTime.now().uptimeNanoseconds
        _ = try call("Page.navigate", ["url": url])
        let quoted = String(decoding: try JSONSerialization.data(withJSONObject: [url]), as: UTF8.self)
        let probe = "(() => { if (location.href !== \(quoted)[0] || !document.body || !document.body.dataset.firstDrawMs) return ''; "
            + "return JSON.stringify({d: Object.assign({}, document.body.dataset), f: document.querySelectorAll('tr.folder').length, "
            + "r: document.querySelectorAll('tr[data-url]').length}); })()"
        while true {
            let result = try call("Runtime.evaluate", ["expression": probe, "returnByValue": true])
            if let value = (result["result"] as? [String: Any])?["value"] as? String, !value.isEmpty,
               let object = try JSONSerialization.jsonObject(with: Data(value.utf8)) as? [String: Any] {
                let wall = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
                let dataset = (object["d"] as? [String: Any] ?? [:]).mapValues { "\($0)" }
                return Drawn(pageMilliseconds: Double(dataset["firstDrawMs"] ?? "") ?? -1, wallSeconds: wall, dataset: dataset,
                             folderRows: object["f"] as? Int ?? 0, fileRows: object["r"] as? Int ?? 0)
            }
            guard Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9 < timeout else {
                throw ValidationError("chromium: \(url) did not draw within \(Int(timeout)) s")
            }
            usleep(5000)
        }
    }

    /// Ends the browser (and waits for it).
    func quit() {
        _ = try? send("Browser.close", [:], session: nil)
        Glibc.close(commands)
        Glibc.close(answers)
        var status: Int32 = 0
        for _ in 0..<100 {
            if waitpid(pid, &status, WNOHANG) == pid { return }
            usleep(50_000)
        }
        kill(pid, SIGKILL)
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    // MARK: the protocol

    /// Sends one command (to the page's session unless `session` is nil) and returns its result.
    private func call(_ method: String, _ params: [String: Any]) throws -> [String: Any] {
        try call(method, params, session: session)
    }

    private func call(_ method: String, _ params: [String: Any], session: String?) throws -> [String: Any] {
        let id = try send(method, params, session: session)
        while true {
            let message = try receive()
            guard message["id"] as? Int == id else { continue }   // events, and answers nobody waits for
            if let error = message["error"] { throw ValidationError("chromium: \(method) failed: \(error)") }
            return message["result"] as? [String: Any] ?? [:]
        }
    }

    private func send(_ method: String, _ params: [String: Any], session: String?) throws -> Int {
        let id = nextID
        nextID += 1
        var message: [String: Any] = ["id": id, "method": method, "params": params]
        if let session, !session.isEmpty { message["sessionId"] = session }
        var bytes = Array(try JSONSerialization.data(withJSONObject: message))
        bytes.append(0)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(commands, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw ValidationError("chromium: writing to its pipe: \(String(cString: strerror(errno)))") }
            sent += n
        }
        return id
    }

    private func receive() throws -> [String: Any] {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(timeout * 1e9)
        while true {
            if let end = buffer.firstIndex(of: 0) {
                let message = Array(buffer[..<end])
                buffer.removeSubrange(...end)
                guard let object = try JSONSerialization.jsonObject(with: Data(message)) as? [String: Any] else { continue }
                return object
            }
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { throw ValidationError("chromium: no answer within \(Int(timeout)) s") }
            var p = pollfd(fd: answers, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(min(1000, (deadline - now) / 1_000_000 + 1)))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let n = chunk.withUnsafeMutableBytes { read(answers, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw ValidationError("chromium ended (its pipe closed)") }
            buffer += chunk[..<n]
        }
    }
}
