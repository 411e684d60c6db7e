import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs-bench scale --direct-fill`'s restart step (issue 51, the clean-up after a start):
/// how long a stop (SIGTERM) takes when it comes as soon as the mount is usable, and what the
/// daemon spends in its first seconds (CPU, the highest RSS sampled), after a clean stop and
/// after a kill -9 (when the clean-up after the start looks through every data file).
extension ScaleBench {
    struct RestartFigures {
        var stopAfterClean: Double
        var stopAfterCrash: Double
        var firstAfterClean: (cpu: Double, rss: Int64)
        var firstAfterCrash: (cpu: Double, rss: Int64)
        /// From the mount being usable until the daemon idles (its start's background work done).
        var idleAfterClean: (seconds: Double, cpu: Double)
        var idleAfterCrash: (seconds: Double, cpu: Double)
    }

    /// The window after the mount is usable that `first…` figures cover.
    static let firstSeconds = 3.0

    /// Runs over `daemon`'s cache, unmounted and stopped cleanly; leaves it so.
    static func restartStep(daemon: MountDaemon) throws -> RestartFigures {
        // A start whose own background work (the count, the clean-up) ran to its end, then a
        // clean stop: what a restart of a daemon that ran a while finds.
        try daemon.mount()
        try waitIdle(daemon)
        daemon.unmount()
        try daemon.mount()
        var mark = (at: DispatchTime.now().uptimeNanoseconds, cpu: try daemon.cpuSeconds())
        let firstAfterClean = try firstSeconds(daemon)
        let idleAfterClean = try untilIdle(daemon, since: mark)
        daemon.unmount()
        try daemon.mount()
        let stopAfterClean = try stopTime(daemon)

        try daemon.mount()
        try crash(daemon)
        try daemon.mount()
        mark = (at: DispatchTime.now().uptimeNanoseconds, cpu: try daemon.cpuSeconds())
        let firstAfterCrash = try firstSeconds(daemon)
        let idleAfterCrash = try untilIdle(daemon, since: mark)
        try crash(daemon)
        try daemon.mount()
        let stopAfterCrash = try stopTime(daemon)
        return RestartFigures(stopAfterClean: stopAfterClean, stopAfterCrash: stopAfterCrash,
                              firstAfterClean: firstAfterClean, firstAfterCrash: firstAfterCrash,
                              idleAfterClean: idleAfterClean, idleAfterCrash: idleAfterCrash)
    }

    /// CPU seconds and the highest RSS (sampled every 20 ms) in the first `firstSeconds`.
    private static func firstSeconds(_ daemon: MountDaemon) throws -> (cpu: Double, rss: Int64) {
        let cpu = try daemon.cpuSeconds()
        var rss = try daemon.residentMemory()
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(firstSeconds * 1e9)
        while DispatchTime.now().uptimeNanoseconds < end {
            usleep(20_000)
            rss = max(rss, try daemon.residentMemory())
        }
        return (try daemon.cpuSeconds() - cpu, rss)
    }

    /// Until the daemon used less than 20 ms of CPU in half a second (two minutes at most).
    private static func waitIdle(_ daemon: MountDaemon) throws {
        var cpu = try daemon.cpuSeconds()
        for _ in 0..<240 {
            usleep(500_000)
            let now = try daemon.cpuSeconds()
            if now - cpu < 0.02 { return }
            cpu = now
        }
    }

    /// Seconds (the last idle half second not counted) and CPU seconds from `mark` until the daemon idles.
    private static func untilIdle(_ daemon: MountDaemon, since mark: (at: UInt64, cpu: Double)) throws -> (seconds: Double, cpu: Double) {
        try waitIdle(daemon)
        return (Double(DispatchTime.now().uptimeNanoseconds - mark.at) / 1e9 - 0.5, try daemon.cpuSeconds() - mark.cpu)
    }

    /// Seconds from SIGTERM to the daemon's exit.
    private static func stopTime(_ daemon: MountDaemon) throws -> Double {
        let pid = try daemon.pid()
        let began = DispatchTime.now().uptimeNanoseconds
        kill(pid, SIGTERM)
        try waitForExit(pid)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        daemon.unmount()
        return seconds
    }

    /// kill -9, as a crash; the next mount clears the stale mount it leaves.
    private static func crash(_ daemon: MountDaemon) throws {
        let pid = try daemon.pid()
        kill(pid, SIGKILL)
        try waitForExit(pid)
    }

    private static func waitForExit(_ pid: pid_t) throws {
        let deadline = DispatchTime.now().uptimeNanoseconds + 120_000_000_000
        while kill(pid, 0) == 0 {
            guard DispatchTime.now().uptimeNanoseconds < deadline else { throw ValidationError("process \(pid) still runs after 120 s") }
            usleep(1000)
        }
    }
}
