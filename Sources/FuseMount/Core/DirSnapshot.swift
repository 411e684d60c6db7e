/// A directory's entries as one opendir saw them, which its readdir offsets index: `.` and
/// `..`, then the children sorted by their names' bytes.
///
/// Holds the children's nodes, not copies of their names: 8 bytes an entry while the handle is
/// open, where a `DirEntry` copy takes 32 (32 MB for a folder of a million names). A node keeps
/// its name, number and kind for as long as this holds it, detached or forgotten since, so the
/// offsets stay what they were across a newer listing. Lives in `FileSystemCore.State`, under its
/// lock; a node's `name`, `ino` and kind never change.
struct DirSnapshot {
    let ino: UInt64
    let parent: UInt64
    let children: [Node]

    var count: Int { children.count + 2 }

    subscript(i: Int) -> DirEntry {
        switch i {
        case 0: return DirEntry(name: ".", ino: ino, isDirectory: true)
        case 1: return DirEntry(name: "..", ino: parent, isDirectory: true)
        default:
            let child = children[i - 2]
            return DirEntry(name: child.name, ino: child.ino, isDirectory: child.isDirectory)
        }
    }

    /// The child at offset `i`, if `i` is no `.` or `..`.
    func child(at i: Int) -> Node? { i >= 2 && i < count ? children[i - 2] : nil }
}
