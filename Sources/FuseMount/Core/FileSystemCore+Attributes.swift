import CacheCore
import Foundation
import Glibc

/// Extended attributes: the cache's state of a file (`CacheAttributes`), and pins set with
/// `setfattr`. Reads run on the FUSE thread (the cache answers from memory); a pin opens the
/// file (which may ask the origin for its size) and records the pin on an engine thread, then
/// warms the pinned bytes in the background.
extension FileSystemCore {
    /// The file's URL and size as the tree knows them; an errno for a directory or a gone node.
    private func fileOf(_ ino: UInt64, directoryError: Int32) -> Result<(url: String, size: Int64?), FSErrno> {
        state.withLock { s in
            guard let node = s.table.node(ino) else { return .failure(FSErrno(ENOENT)) }
            guard let f = node.file else { return .failure(FSErrno(directoryError)) }
            return .success((f.url, f.size))
        }
    }

    func getxattr(_ ino: UInt64, name: String) -> Result<[UInt8], FSErrno> {
        xattrRequests.withLock { $0 += 1 }
        switch CacheAttributes.name(name) {
        case .other: return .failure(FSErrno(ENOTSUP))
        case .unknownOurs: return .failure(FSErrno(ENODATA))
        case .pin: return getxattr(ino, name: CacheAttributes.prefix + CacheAttributes.Readable.pinned.rawValue)
        case let .readable(attribute):
            return fileOf(ino, directoryError: ENODATA).map { file in
                Array(CacheAttributes.value(attribute, url: file.url, size: file.size, status: backend.status(url: file.url),
                                            pinned: backend.pinnedRanges(url: file.url)).utf8)
            }
        }
    }

    /// Our names on a file; none on a directory.
    func listxattr(_ ino: UInt64) -> Result<[UInt8], FSErrno> {
        state.withLock { s in
            guard let node = s.table.node(ino) else { return .failure(FSErrno(ENOENT)) }
            return .success(node.file == nil ? [] : CacheAttributes.listing)
        }
    }

    /// `caller`: the request's uid (`PinPermission` decides; nil is no one's).
    func setxattr(_ ino: UInt64, name: String, value: [UInt8], caller: uid_t?, reply: @escaping @Sendable (Result<Void, FSErrno>) -> Void) {
        switch CacheAttributes.name(name) {
        case .other: return reply(.failure(FSErrno(ENOTSUP)))
        case .unknownOurs, .readable: return reply(.failure(FSErrno(EPERM)))
        case .pin:
            guard mayPin(caller) else { return reply(.failure(FSErrno(EPERM))) }
            guard let pin = CacheAttributes.pinValue(value) else { return reply(.failure(FSErrno(EINVAL))) }
            setPin(ino, pin, reply: reply)
        }
    }

    func removexattr(_ ino: UInt64, name: String, caller: uid_t?, reply: @escaping @Sendable (Result<Void, FSErrno>) -> Void) {
        switch CacheAttributes.name(name) {
        case .other: reply(.failure(FSErrno(ENOTSUP)))
        case .unknownOurs, .readable: reply(.failure(FSErrno(EPERM)))
        case .pin: mayPin(caller) ? setPin(ino, false, reply: reply) : reply(.failure(FSErrno(EPERM)))
        }
    }

    /// The daemon's own decision, whatever the kernel let through (`PinPermission`); a refusal
    /// is logged, naming the uid, so the owner can tell why a pin did not take.
    private func mayPin(_ caller: uid_t?) -> Bool {
        guard let caller, PinPermission.decide(requestUID: caller, mountOwner: options.owner) == .allowed else {
            logger.info("pin refused: uid \(caller.map(String.init) ?? "?") is neither the mount's owner (uid \(options.owner)) nor root")
            return false
        }
        return true
    }

    /// Pins the file's head and tail (`CacheAttributes.pinRanges`) and warms them as a
    /// background reader, or unpins it. The pin is recorded before the reply; the warm-up runs
    /// after it, taking only what the link has left.
    private func setPin(_ ino: UInt64, _ pin: Bool, reply: @escaping @Sendable (Result<Void, FSErrno>) -> Void) {
        let url: String
        switch fileOf(ino, directoryError: EPERM) {
        case let .failure(e): return reply(.failure(e))
        case let .success(file): url = file.url
        }
        backend.open(url: url) { [self] result in
            switch Self.checkedLength(result) {
            case let .failure(error):
                logger.error("pin failed: \(DisplayURL.redacted(url)): \(error)")
                reply(.failure(FSErrno(error.errno)))
            case let .success(info):
                let ranges = pin ? CacheAttributes.pinRanges(size: info.length ?? 0) : []
                if pin && ranges.isEmpty { return reply(.failure(FSErrno(EINVAL))) }   // no size: nothing to pin
                do {
                    try backend.setPins(url: url, ranges: ranges)
                } catch {
                    logger.error("\(pin ? "pin" : "unpin") failed: \(DisplayURL.redacted(url)): \(error)")
                    // A pin past the limit: no room for it, as for a write past a quota.
                    return reply(.failure(FSErrno(error is PinRefusal ? ENOSPC : (error as? CacheError)?.errno ?? EIO)))
                }
                logger.info("\(pin ? "pinned" : "unpinned") \(DisplayURL.redacted(url))\(pin ? " (\(ranges.count == 1 ? "whole" : "head and tail"))" : "")")
                if pin { warm(info, ranges) }   // started before the reply: it counts in `warmUps` by then
                reply(.success(()))
            }
        }
    }

    /// Reads `ranges` of the file through a background reader (fetched with what the link has
    /// left), one after another, and lets the bytes go: they stay in the cache, pinned.
    private func warm(_ info: EntryInfo, _ ranges: [Range<Int64>]) {
        let reader = backend.makeReader(for: info, readerClass: .background)
        let chunk = 1 << 20
        let logger = logger, warmUps = warmUps
        warmUps.enter()
        @Sendable func next(_ rest: ArraySlice<Range<Int64>>) {
            guard let r = rest.first else {
                reader.close()
                return warmUps.leave()
            }
            let count = Int(min(Int64(chunk), r.upperBound - r.lowerBound))
            reader.lease(offset: r.lowerBound, length: count) { result in
                switch result {
                case let .success(lease):
                    lease.release()
                    let left = r.lowerBound + Int64(count)..<r.upperBound
                    next(left.isEmpty ? rest.dropFirst() : [left] + rest.dropFirst())
                case let .failure(error):
                    logger.warning("warming a pinned file stopped: \(DisplayURL.redacted(info.url)): \(error)")
                    reader.close()
                    warmUps.leave()
                }
            }
        }
        next(ranges[...])
    }
}
