import CacheCore
import Foundation

/// Which bytes of each file `preload` caches: `--head` and `--tail` (where players and scanners
/// read first: the container header, and an MP4's moov atom at the end), else `--range`, else
/// the whole file. Pure: the command resolves it per file once the length is known.
struct PreloadPlan: Equatable {
    var head: Int64?
    var tail: Int64?
    var range: ByteRangeSpec?

    var isWholeFile: Bool { head == nil && tail == nil && range == nil }

    /// `--head`/`--tail` warm what a media scanner reads: their slices go to the cap's scan share.
    var fillsScanShare: Bool { head != nil || tail != nil }

    /// The half-open ranges to cache of a file of `length` bytes, in order, merged where they
    /// touch. nil `length` (the origin gave none): the head alone, or the range or the whole file
    /// read to its end (an `Int64.max` end); a tail needs the length and is then left out.
    func ranges(length: Int64?, url: String) throws -> [Range<Int64>] {
        if head != nil || tail != nil {
            var out: [Range<Int64>] = []
            if let head, head > 0 { out.append(0..<min(head, length ?? head)) }
            if let tail, tail > 0, let length { out.append(max(0, length - tail)..<length) }
            return Self.merged(out.filter { !$0.isEmpty })
        }
        let (start, end) = try (range ?? .from(0)).resolve(length: length, url: url)
        let upper = end ?? .max
        return start < upper ? [start..<upper] : []
    }

    /// What this plan means, for the summary line ("head 1 MiB + tail 4 MiB of each file").
    var description: String {
        if isWholeFile { return "whole files" }
        if let range { return "range \(range) of each file" }
        let parts = [head.map { "head \(Format.bytes($0))" }, tail.map { "tail \(Format.bytes($0))" }].compactMap { $0 }
        return parts.joined(separator: " + ") + " of each file"
    }

    static func merged(_ ranges: [Range<Int64>]) -> [Range<Int64>] {
        var out: [Range<Int64>] = []
        for r in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = out.last, r.lowerBound <= last.upperBound {
                out[out.count - 1] = last.lowerBound..<max(last.upperBound, r.upperBound)
            } else {
                out.append(r)
            }
        }
        return out
    }

    static func bytes(_ ranges: [Range<Int64>]) -> Int64 {
        ranges.reduce(0) { $0 + ($1.upperBound == .max ? 0 : $1.upperBound - $1.lowerBound) }
    }
}
