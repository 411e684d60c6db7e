/// Whether the FUSE loop waits for the next request awake (asking /dev/fuse again) or asleep in
/// poll(). Pure: the loop gives it the clock.
///
/// Why: a FUSE request is a round trip between two threads, usually on two CPUs. A loop that
/// sleeps between requests is woken by the kernel for each one, and on a virtual machine that
/// wake-up (an interrupt to the other CPU, the sleep and the switch back) costs more than
/// answering. A `cat` or a scan of a folder of small cached files sends an OPEN and a RELEASE per
/// file a few microseconds apart: measured here (issue 51), 10,000 files took 0.61 s with a
/// sleeping loop, 0.36 s with the reader and the loop pinned to one CPU (no cross-CPU wake-up),
/// and 0.41 s with this spin; plain files took 0.13 s. The kernel's own guest idle loop does the
/// same (haltpoll): poll a little before halting.
///
/// The rule keeps the cost bounded: the loop stays awake only when the request it just served
/// was answered right there (the requester, woken by that reply, may follow at once: a `cat`'s
/// next open, a scanner's next stat, a cached read's next read) and came inside a burst, less than
/// `window` after the one before; and then for at most `window` after it. A request handed to an
/// engine thread (a cold read: the kernel's next READs come when the network has delivered) does
/// not keep it awake, nor do a player's reads, milliseconds apart; an idle mount costs nothing. At
/// worst (requests alternately just inside and far outside the window) it spends `window` of CPU
/// per request. A process that may run on one CPU only never spins: it would keep the reader off
/// that CPU.
public struct LoopSpin: Equatable {
    /// How close two requests must come to make a burst, and how long the loop stays awake after
    /// a request of one; 0 turns spinning off.
    let window: UInt64
    /// 50 µs: the gap between a small file's RELEASE and the next file's OPEN in a `cat` is
    /// 5-20 µs here, and a sleeping loop's wake-up costs about as much.
    public static let defaultWindow: UInt64 = 50_000

    private var lastArrival: UInt64?
    private var inBurst = false
    private var answeredInline = false

    init(window: UInt64 = LoopSpin.defaultWindow, cpus: Int) {
        self.window = cpus >= 2 ? window : 0
    }

    /// A request was read at `now` (nanoseconds on a monotonic clock).
    mutating func arrived(at now: UInt64) {
        if let last = lastArrival {
            inBurst = window > 0 && now &- last < window
        }
        lastArrival = now
        answeredInline = false
    }

    /// The loop served that request: `inline`, its reply went out before the loop went on.
    mutating func served(inline: Bool) {
        answeredInline = inline
    }

    /// /dev/fuse had nothing at `now`: until when to keep asking it, or nil to sleep.
    func awakeUntil(now: UInt64) -> UInt64? {
        guard inBurst, answeredInline, let last = lastArrival else { return nil }
        let end = last &+ window
        return now < end ? end : nil
    }
}
