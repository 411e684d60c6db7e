/// The engine's side of a waiting read: the machine's `Waiter` keeps its `WaitingRead` as its
/// `reply` (every waiter is made by `Reader.read`'s `makeReply`), and these give it the names
/// the engine's steps use: its data file, its answer, the bytes it holds.
extension Waiter {
    typealias Completion = WaitingRead.Completion

    /// The engine's part of it.
    @inline(__always)
    var read: WaitingRead { unsafeDowncast(reply as AnyObject, to: WaitingRead.self) }

    var files: ReaderFiles { read.files }
    var completion: Completion { read.completion }
    var held: [(range: Range<Int64>, bytes: ChunkBytes, kept: Bool)] { read.held }
    var retaining: Bool { read.retaining }

    /// `WaitingRead.fill`.
    func fill(_ bytes: Range<Int64>, in storage: ChunkStorage, at offset: Int, force: Bool = false) {
        read.fill(bytes, in: storage, at: offset, force: force)
    }

    /// `WaitingRead.runs(of:)`.
    func runs(of wanted: Range<Int64>) -> [(Range<Int64>, ChunkBytes?)] { read.runs(of: wanted) }
}
