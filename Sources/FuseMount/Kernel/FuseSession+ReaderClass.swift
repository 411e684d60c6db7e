import CacheCore
import CFuse3

extension FuseSession {
    /// The class of the process that sent `req` (the kernel names its thread in the request):
    /// read from /proc on the FUSE thread, once per open.
    func readerClass(of req: fuse_req_t) -> ReaderClass {
        guard let ctx = fuse_req_ctx(req), let name = ProcessName.of(pid: ctx.pointee.pid) else { return .unknown }
        return options.readerClasses.classify(comm: name.comm, executable: name.executable)
    }
}
