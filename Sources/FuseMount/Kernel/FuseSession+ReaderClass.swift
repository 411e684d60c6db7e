import CacheCore
import CFuse3

extension FuseSession {
    /// The class of the process that sent `req` (the kernel names its thread in the request):
    /// one read of `/proc/PID/stat` on the FUSE thread per open, and the names looked up and
    /// classified once per process (`ReaderClassMemo`).
    func readerClass(of req: fuse_req_t) -> ReaderClass {
        guard let ctx = fuse_req_ctx(req) else { return .unknown }
        let pid = ctx.pointee.pid
        let identity = ProcessStat.of(pid: pid).map { ReaderClassMemo.Identity(startTime: $0.startTime, comm: $0.comm) }
        return readerClasses.readerClass(pid: pid, identity: identity) {
            guard let name = ProcessName.of(pid: pid) else { return .unknown }
            return options.readerClasses.classify(comm: name.comm, executable: name.executable)
        }
    }
}
