import CacheCore
import Foundation

/// Files a refresh added, removed or changed, told to whoever listens (`--on-change`): once per
/// listing refreshed on its own (its TTL ran out), once per `refresh` of many listings.
extension FileSystemCore {
    func setChangeHandler(_ handler: @escaping @Sendable ([String]) -> Void) {
        state.withLock { $0.onChange = handler }
    }

    /// Reports `paths` now, or at the end of the `refresh` under way.
    func report(changes paths: [String]) {
        guard !paths.isEmpty else { return }
        let now: (@Sendable ([String]) -> Void)? = state.withLock { s in
            guard let handler = s.onChange else { return nil }
            if s.changeBatches > 0 { s.pendingChanges += paths; return nil }
            return handler
        }
        now?(paths)
    }

    /// Holds reports back until `endChangeBatch`.
    func beginChangeBatch() { state.withLock { $0.changeBatches += 1 } }

    func endChangeBatch() {
        let (handler, paths): ((@Sendable ([String]) -> Void)?, [String]) = state.withLock { s in
            s.changeBatches -= 1
            guard s.changeBatches == 0, !s.pendingChanges.isEmpty else { return (nil, []) }
            defer { s.pendingChanges = [] }
            return (s.onChange, s.pendingChanges)
        }
        if let handler, !paths.isEmpty { handler(paths) }
    }

    /// `node`'s path from the mount's root ("" for the root). Under the lock (`s`).
    func path(of node: Node, _ s: State) -> String {
        var names: [String] = []
        var n = node
        while n.ino != InodeTable.rootIno {
            names.append(n.name)
            guard let parent = s.table.node(n.parent) else { break }
            n = parent
        }
        return names.reversed().joined(separator: "/")
    }
}
