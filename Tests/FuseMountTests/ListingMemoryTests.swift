import CacheCore
import Foundation
import Glibc
import XCTest
@testable import FuseMount

/// What the compact tree of listed names must keep (a listed file is its `Node` alone, its URL a
/// listing's shared start and its own end): every name found by its exact bytes and its file by
/// its exact URL, readdir offsets that stay across a newer listing, forgets that release what a
/// newer listing dropped, and a listing budget that counts what an entry costs.
final class ListingMemoryTests: XCTestCase {
    let backend = FakeBackend()
    let base = "http://o/pub/"

    private func options() -> MountOptions {
        var options = MountOptions(revalidateAfter: 600, listingTTL: 600)
        options.listingStaleWindow = 0   // an expired listing is fetched before it is shown
        return options
    }

    private func calls(_ options: MountOptions? = nil) throws -> CoreCalls {
        CoreCalls(backend: backend, tree: try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex(base)]),
                  options: options ?? self.options())
    }

    private func json(_ files: [(name: String, size: Int64)]) -> [UInt8] {
        let items = files.map { f -> String in
            let name = String(decoding: try! JSONEncoder().encode(f.name), as: UTF8.self)
            return #"{"name":\#(name),"type":"file","size":\#(f.size)}"#
        }
        return Array("[\(items.joined(separator: ","))]".utf8)
    }

    private func url(of name: String, in c: CoreCalls) -> String? {
        c.core.state.withLock { $0.table.child(of: InodeTable.rootIno, named: name)?.file?.url }
    }

    // MARK: Names and URLs

    /// Names past 15 bytes (kept on the heap), names whose URL end is spelled otherwise (escapes),
    /// names equal only under Unicode normalization, and names that differ in one byte each get
    /// their own file, found by their bytes, with the URL the listing gave.
    func testOddNamesAreFoundByTheirExactBytesWithTheirListedURLs() throws {
        let names = ["a", "a name of more than fifteen bytes.mkv", "50% off #1?.mp4", "caf\u{E9}.mp4", "cafe\u{301}.mp4",
                     "\u{1F3AC} film.mkv", "a;b=c&d.txt", "tab\u{A0}nbsp.bin", "A", "a "]
        backend.setFile(base, json(names.enumerated().map { ($1, Int64(100 + $0)) }))
        let c = try calls()
        let entries = try DirectoryListing.parse(json(names.enumerated().map { ($1, Int64(100 + $0)) }), url: base)
        let listed = try c.list().get()
        XCTAssertEqual(Set(listed.map { Array($0.utf8) }), Set(names.map { Array($0.utf8) }))
        for (i, name) in names.enumerated() {
            XCTAssertEqual(try c.lookup(name).get().size, Int64(100 + i), name)
            let expected = try XCTUnwrap(entries.first { $0.name.utf8.elementsEqual(name.utf8) }).url
            XCTAssertEqual(url(of: name, in: c).map { Array($0.utf8) }, Array(expected.utf8), name)
        }
        XCTAssertEqual(try c.lookup("caf").map(\.size), .failure(FSErrno(ENOENT)))
        XCTAssertEqual(try c.lookup("A ").map(\.size), .failure(FSErrno(ENOENT)))
    }

    /// A file's URL survives what the tree does to it: a renumbered inode (`InodeTable.renumber`)
    /// keeps the URL, size and cache entry, and none of the old inode's opens.
    func testARenumberedFileKeepsItsURLAndSizeAndNoneOfItsOpens() throws {
        backend.setFile(base, json([("a long file name, past the inline bytes.bin", 7)]))
        let c = try calls()
        _ = try c.list().get()
        let name = "a long file name, past the inline bytes.bin"
        let (before, after): (FileState?, FileState?) = c.core.state.withLock { s in
            let node = s.table.child(of: InodeTable.rootIno, named: name)
            node?.file?.lastOpenGeneration = 3
            node?.file?.key = CacheKey(rawValue: "k")
            let moved = node.flatMap { s.table.renumber($0.ino) }
            return (node?.file, moved?.file)
        }
        let listed = try DirectoryListing.parse(json([(name, 7)]), url: base)
        XCTAssertEqual(after?.url, listed.first?.url)
        XCTAssertEqual(after?.url, before?.url)
        XCTAssertEqual(after?.size, 7)
        XCTAssertNil(after?.lastOpenGeneration)
        XCTAssertNil(after?.key)
        XCTAssertEqual(before?.lastOpenGeneration, 3, "the old inode keeps its own")
    }

    // MARK: Readdir offsets and forgets across a newer listing

    /// A handle opened before a newer listing reads the entries it saw, at the offsets it saw
    /// them, while the newer listing shows the new names to the next opendir.
    func testReaddirOffsetsStayAcrossAListingReplacement() throws {
        backend.setFile(base, json((0..<50).map { (String(format: "file %02d.bin", $0), 1) }))
        let c = try calls()
        let root = InodeTable.rootIno
        XCTAssertEqual(try c.list().get().count, 50)
        let fh = try c.core.snapshot(root).get()
        func read(_ offset: Int) -> [String] {
            var names: [String] = []
            _ = c.core.readdir(fh: fh, offset: offset) { _, e in names.append(e.name); return names.count < 10 }
            return names
        }
        let first = read(20)
        XCTAssertEqual(first.first, "file 18.bin", "offsets 0 and 1 are . and ..")
        // The newer listing drops the even files and adds others.
        backend.setFile(base, json((0..<50).filter { $0 % 2 == 1 }.map { (String(format: "file %02d.bin", $0), 1) }
            + (0..<30).map { (String(format: "new %02d.bin", $0), 2) }))
        c.clock.advance(700)
        XCTAssertEqual(try c.list().get().count, 55)
        XCTAssertEqual(read(20), first, "the open handle reads what it saw")
        var withAttributes: [String] = []
        _ = c.core.readdirplus(fh: fh, offset: 20) { _, e, attr in
            if attr != nil { withAttributes.append(e.name) }
            return true
        }
        XCTAssertTrue(withAttributes.allSatisfy { Int($0.dropFirst(5).prefix(2)).map { $0 % 2 == 1 } ?? false }, "\(withAttributes)")
        XCTAssertEqual(withAttributes.count, 16, "the names gone since the opendir come without attributes")
        c.core.releasedir(fh: fh)
    }

    /// A node the kernel holds stays in the table after a newer listing drops its name, and goes
    /// once the kernel forgets it: lookups by readdirplus and by LOOKUP counted alike.
    func testForgetReleasesWhatANewerListingDropped() throws {
        backend.setFile(base, json((0..<10).map { ("f\($0)", 1) }))
        let c = try calls()
        XCTAssertEqual(try c.list().get().count, 10)
        let f3 = try c.lookup("f3").get().ino
        _ = try c.lookup("f3").get()
        let fh = try c.core.snapshot(InodeTable.rootIno).get()
        _ = c.core.readdirplus(fh: fh, offset: 0) { _, _, _ in true }   // one more lookup of each
        c.core.releasedir(fh: fh)
        let before = c.core.state.withLock { $0.table.count }
        backend.setFile(base, json((0..<10).filter { $0 != 3 }.map { ("f\($0)", 1) }))
        c.clock.advance(700)
        XCTAssertEqual(try c.list().get().count, 9)
        XCTAssertEqual(try c.lookup("f3").map(\.size), .failure(FSErrno(ENOENT)))
        c.core.state.withLock { s in
            XCTAssertEqual(s.table.node(f3)?.attached, false)
            XCTAssertEqual(s.table.lookups(of: f3), 3)
            XCTAssertEqual(s.table.count, before, "held by the kernel, detached")
        }
        c.core.forget(f3, count: 2)
        XCTAssertNotNil(c.core.state.withLock { $0.table.node(f3) })
        c.core.forget(f3, count: 1)
        c.core.state.withLock { s in
            XCTAssertNil(s.table.node(f3))
            XCTAssertEqual(s.table.count, before - 1)
        }
    }

    /// A node counts its lookups in four bytes; past that the table keeps the rest, and forgets
    /// take from the whole count: the node goes when, and only when, the kernel let go of all.
    func testLookupCountsPastFourBytesStayExact() {
        var t = InodeTable(rootMtime: Date())
        let a = t.add(parent: InodeTable.rootIno, name: "a", origin: .listing, content: .file(FileState(url: "http://o/a")))
        a.lookups = .max - 1
        for _ in 0..<3 { t.lookedUp(a.ino) }
        XCTAssertEqual(t.lookups(of: a.ino), UInt64(UInt32.max) + 2)
        _ = t.detach(a.ino)
        t.forget(a.ino, count: 2)
        XCTAssertEqual(t.lookups(of: a.ino), UInt64(UInt32.max))
        t.lookedUp(a.ino)
        t.forget(a.ino, count: UInt64(UInt32.max))
        XCTAssertEqual(t.lookups(of: a.ino), 1, "still held")
        XCTAssertTrue(t.node(a.ino) === a)
        t.forget(a.ino, count: 1)
        XCTAssertNil(t.node(a.ino), "let go with the last reference")
    }

    // MARK: Memory and the budget

    /// A listed file is one heap block of at most 112 bytes (its state inside its node): the
    /// figure `listingEntryCost` counts it at.
    func testAListedFileIsOneHeapBlockOfAtMost112Bytes() throws {
        typealias UsableSize = @convention(c) (UnsafeMutableRawPointer?) -> Int
        guard let usableSize = dlsym(dlopen(nil, RTLD_NOW), "malloc_usable_size").map({ unsafeBitCast($0, to: UsableSize.self) }) else {
            throw XCTSkip("no malloc_usable_size in this C library: the node's heap block cannot be measured")
        }
        backend.setFile(base, json([("0000001.bin", 4096)]))
        let c = try calls()
        _ = try c.list().get()
        // The node stays in the table meanwhile: nothing here forgets or replaces it.
        let address: UInt? = c.core.state.withLock { s -> UInt? in
            s.table.child(of: InodeTable.rootIno, named: "0000001.bin").map { UInt(bitPattern: Unmanaged.passUnretained($0).toOpaque()) }
        }
        let block = usableSize(UnsafeMutableRawPointer(bitPattern: try XCTUnwrap(address))) + 8   // with malloc's header
        XCTAssertLessThanOrEqual(block, 112)
    }

    /// Nodes by number in pages: each number finds its node, the count stays exact, and a page
    /// whose nodes are all gone is let go (a listing that came and went holds no slots).
    func testNodeSlotsFindEveryNodeAndLetEmptyPagesGo() {
        var slots = NodeSlots()
        let made = (2..<3000).map { Node(ino: UInt64($0), parent: 1, name: "n\($0)", origin: .listing, content: .file(FileState(url: "http://o/n\($0)"))) }
        for node in made { slots[node.ino] = node }
        XCTAssertEqual(slots.count, 2998)
        XCTAssertEqual(slots.pageCount, 3)
        XCTAssertTrue(made.allSatisfy { slots[$0.ino] === $0 })
        XCTAssertNil(slots[1])
        XCTAssertNil(slots[3000])
        slots[5] = made[4]   // replaced in place (by ino 6's node): counted once
        XCTAssertEqual(slots.count, 2998)
        for ino in 1024..<2048 { slots[UInt64(ino)] = nil }
        XCTAssertEqual(slots.count, 2998 - 1024)
        XCTAssertEqual(slots.pageCount, 2, "the emptied page is let go")
        slots[1500] = nil   // already gone
        XCTAssertEqual(slots.count, 2998 - 1024)
        XCTAssertEqual(Set(slots.values.map(\.ino)).count, 2998 - 1024 - 1, "slot 5 holds ino 6's node")
        XCTAssertNil(slots[1500])
    }

    /// The budget counts each entry at what it keeps: the node and its two slots, a name on the
    /// heap past 15 bytes, a URL end spelled otherwise than the name, a folder's own state.
    func testTheBudgetCountsWhatAnEntryKeeps() {
        func file(_ name: String, _ url: String) -> ListingEntry { ListingEntry(name: name, isDirectory: false, url: url) }
        let short = FileSystemCore.entryCost(file("0000001.bin", base + "0000001.bin"))
        XCTAssertEqual(short, MountOptions.listingEntryCost)
        let long = "a name of more than fifteen bytes.mkv"
        XCTAssertEqual(FileSystemCore.entryCost(file(long, base + long)), short + 80, "37 bytes on the heap, the URL's end shared")
        XCTAssertEqual(FileSystemCore.entryCost(file("a b", base + "a%20b")), short, "both inline")
        XCTAssertEqual(FileSystemCore.entryCost(file("a long name with spaces", base + "a%20long%20name%20with%20spaces")),
                       short + 64 + 80, "the name and its escaped spelling")
        let folder = ListingEntry(name: "sub", isDirectory: true, url: base + "sub/")
        XCTAssertEqual(FileSystemCore.entryCost(folder), short + 256 + 64)
        // The default budget holds over a million short names.
        XCTAssertEqual(MountOptions().maxListingEntries, Int((256 << 20) / MountOptions.listingEntryCost))
        XCTAssertGreaterThan(MountOptions().maxListingEntries, 1_000_000)
    }

    /// A budget of exactly N entries' cost holds a listing of N, and refuses one of N + 1.
    func testABudgetOfNEntriesHoldsNAndRefusesOneMore() throws {
        let files = (0..<100).map { (String(format: "%07d.bin", $0), Int64(1)) }
        let entries = try DirectoryListing.parse(json(files), url: base)
        var options = options()
        options.listingBudget = FileSystemCore.listingCost(entries)
        XCTAssertEqual(options.listingBudget, 100 * MountOptions.listingEntryCost)
        backend.setFile(base, json(files))
        let c = try calls(options)
        XCTAssertEqual(try c.list().get().count, 100)
        XCTAssertEqual(c.core.state.withLock { $0.table.listingBytes }, options.listingBudget)
        backend.setFile(base, json(files + [("one more.bin", 1)]))
        c.clock.advance(700)
        XCTAssertEqual(try c.list().get().count, 100, "refused: the previous listing is served")
        XCTAssertEqual(try c.lookup("one more.bin").map(\.size), .failure(FSErrno(ENOENT)))
    }
}
