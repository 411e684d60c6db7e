/// The tree's nodes by inode number, in pages of 1024 slots: 8 bytes a node where a dictionary
/// of them took 21 to 43 (16-byte buckets at a load of 3/8 to 3/4).
///
/// Works because inode numbers are handed out in order and never reused (`InodeTable`): a
/// number is a page and a slot in it. A page whose nodes are all gone is let go, so a mount whose
/// listings came and went holds pages only where nodes live. Part of `InodeTable`, under
/// `FileSystemCore.State`'s lock; blocks on nothing.
struct NodeSlots {
    static let pageSize: UInt64 = 1024

    private struct Page {
        var slots: [Node?]
        var live = 0
        init() { slots = Array(repeating: nil, count: Int(NodeSlots.pageSize)) }
    }

    private var pages: [UInt64: Page] = [:]
    private(set) var count = 0

    subscript(ino: UInt64) -> Node? {
        get { pages[ino / Self.pageSize]?.slots[Int(ino % Self.pageSize)] }
        set {
            let p = ino / Self.pageSize, i = Int(ino % Self.pageSize)
            let had = pages[p]?.slots[i] != nil
            switch (had, newValue != nil) {
            case (false, false): return
            case (false, true):
                count += 1
                pages[p, default: Page()].live += 1
            case (true, false):
                count -= 1
                pages[p]!.live -= 1
                if pages[p]!.live == 0 { pages[p] = nil; return }
            case (true, true): break
            }
            pages[p]!.slots[i] = newValue
        }
    }

    /// Pages held (each 8 KiB of slots).
    var pageCount: Int { pages.count }

    /// Every node, in no particular order.
    var values: [Node] { pages.values.flatMap { $0.slots.compactMap { $0 } } }
}
