import CacheCore
import CFuse3

extension FuseSession {
    /// The class of the process that sent `req` (the kernel names its thread in the request):
    /// on the FUSE thread, one read of the `comm` of a process already seen (through the
    /// descriptor `ReaderClassMemo` keeps on it; none within a millisecond of the last), and the
    /// names looked up and classified once per process.
    func readerClass(of req: fuse_req_t) -> ReaderClass {
        guard let ctx = fuse_req_ctx(req) else { return .unknown }
        let pid = ctx.pointee.pid
        return readerClasses.readerClass(pid: pid, now: Self.now()) {
            guard let name = ProcessName.of(pid: pid) else { return .unknown }
            return options.readerClasses.classify(comm: name.comm, executable: name.executable)
        }
    }
}
