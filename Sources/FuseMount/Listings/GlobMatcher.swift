/// One `--include`/`--exclude` glob, compiled to a small automaton and matched in time linear in
/// the path (at most the glob's size in steps per character), whatever the glob and the names.
///
/// Why not a regular expression: rclone's globs become regexps, and a backtracking engine
/// (NSRegularExpression, ICU) tries every way to split a name among several stars. Names an
/// origin chooses (250 characters, no match at the end) against `*a*b*c*.mkv` take it seconds
/// each, a listing minutes of CPU. Here every way is followed at once (Thompson's
/// simulation): a set of automaton states moves one character at a time, never back.
///
/// The syntax, as `ListingFilter` documents it: `*` any run of characters but `/`, `**` any run
/// at all, `?` one character but `/`, `[...]` a class (`[!...]` or `[^...]` negated; ranges
/// `a-z`; `]` first is a member; a `\` in it is itself), `{a,b}` either (nested, empty
/// alternatives allowed), `\x` the character x. Characters are Unicode scalars, as the regexps
/// matched code points. A glob starting with `/` matches from the path's start; any other from
/// the start of any segment. Either way it must reach the end of the path.
///
/// Pure and immutable; safe from any thread.
struct GlobMatcher: Sendable, Equatable {
    /// One instruction. Consuming ones move to the next instruction on a matching character;
    /// `split` and `jump` move without one.
    enum Instruction: Sendable, Equatable {
        case scalar(Unicode.Scalar)
        /// `?`, and each character of `*`.
        case anyButSlash
        /// Each character of `**`.
        case any
        case set(CharacterSet)
        case split(Int, Int)
        case jump(Int)
        case match
    }

    /// `[...]`: ranges of scalars, or what is outside them.
    struct CharacterSet: Sendable, Equatable {
        var ranges: [ClosedRange<UInt32>]
        var negated: Bool
        func contains(_ c: Unicode.Scalar) -> Bool {
            ranges.contains { $0.contains(c.value) } != negated
        }
    }

    let program: [Instruction]
    /// From the path's start only (the glob began with `/`), or from any segment's start.
    let anchored: Bool

    struct Invalid: Error, CustomStringConvertible {
        var description: String
    }

    init(_ glob: String) throws {
        var parser = Parser(glob: glob, scalars: Array(glob.unicodeScalars))
        let tree = try parser.parseSequence(topLevel: true)
        var program: [Instruction] = []
        Self.emit(tree, into: &program)
        program.append(.match)
        self.program = program
        anchored = glob.hasPrefix("/")
    }

    /// Whether `path` matches; `steps` counts the instructions visited (tests bound it: at most
    /// the program's size per character, plus one pass for each possible segment start).
    func matches(_ path: String, steps: inout Int) -> Bool {
        let text = Array(path.unicodeScalars)
        var current = StateSet(count: program.count), next = StateSet(count: program.count)
        for i in 0...text.count {
            // A new start at the path's start, and for an unanchored glob at each segment's.
            if i == 0 || (!anchored && text[i - 1] == "/") { add(0, to: &current, steps: &steps) }
            if i == text.count { break }
            if current.members.isEmpty {
                // Nothing alive: an anchored glob has failed; another waits for the next `/`.
                if anchored { return false }
                continue
            }
            let c = text[i]
            next.clear()
            for pc in current.members {
                steps += 1
                let moves: Bool
                switch program[pc] {
                case let .scalar(s): moves = s == c
                case .anyButSlash: moves = c != "/"
                case .any: moves = true
                case let .set(set): moves = set.contains(c)
                case .split, .jump, .match: moves = false
                }
                if moves { add(pc + 1, to: &next, steps: &steps) }
            }
            swap(&current, &next)
        }
        return current.members.contains { program[$0] == .match }
    }

    func matches(_ path: String) -> Bool {
        var steps = 0
        return matches(path, steps: &steps)
    }

    /// Adds `pc` and everything reachable from it without a character. Each instruction is
    /// added once per character (`StateSet`), so this is bounded by the program's size.
    private func add(_ pc: Int, to set: inout StateSet, steps: inout Int) {
        var stack = [pc]
        while let pc = stack.popLast() {
            guard set.insert(pc) else { continue }
            steps += 1
            switch program[pc] {
            case let .split(a, b): stack.append(b); stack.append(a)
            case let .jump(to): stack.append(to)
            default: break
            }
        }
    }

    /// A set of instruction indices with O(1) insert and clear (a generation stamp per index).
    private struct StateSet {
        var members: [Int] = []
        var stamp: [UInt32]
        var generation: UInt32 = 1
        init(count: Int) { stamp = Array(repeating: 0, count: count) }
        mutating func insert(_ pc: Int) -> Bool {
            guard stamp[pc] != generation else { return false }
            stamp[pc] = generation
            members.append(pc)
            return true
        }
        mutating func clear() {
            members.removeAll(keepingCapacity: true)
            generation &+= 1
            if generation == 0 {   // wrapped: every stamp is stale again
                stamp = Array(repeating: 0, count: stamp.count)
                generation = 1
            }
        }
    }

    // MARK: parsing and compiling

    indirect enum Node: Equatable {
        case scalar(Unicode.Scalar)
        case question
        case star
        case doubleStar
        case set(CharacterSet)
        case alternatives([[Node]])
    }

    private struct Parser {
        let glob: String
        let scalars: [Unicode.Scalar]
        var at = 0

        /// Nodes up to the end (top level) or to the `,` or `}` that ends an alternative.
        mutating func parseSequence(topLevel: Bool) throws -> [Node] {
            var nodes: [Node] = []
            while at < scalars.count {
                let c = scalars[at]
                if !topLevel && (c == "," || c == "}") { return nodes }
                at += 1
                switch c {
                case "\\":
                    guard at < scalars.count else { throw Invalid(description: "glob '\(glob)' ends with a lone '\\'") }
                    nodes.append(.scalar(scalars[at]))
                    at += 1
                case "*":
                    if at < scalars.count && scalars[at] == "*" {
                        at += 1
                        nodes.append(.doubleStar)
                    } else {
                        nodes.append(.star)
                    }
                case "?": nodes.append(.question)
                case "[": nodes.append(.set(try parseClass()))
                case "{":
                    var alternatives: [[Node]] = []
                    while true {
                        alternatives.append(try parseSequence(topLevel: false))
                        guard at < scalars.count else { throw Invalid(description: "glob '\(glob)' has a '{' without its '}'") }
                        at += 1
                        if scalars[at - 1] == "}" { break }
                    }
                    nodes.append(.alternatives(alternatives))
                default:
                    // `,` and `}` outside braces are themselves.
                    nodes.append(.scalar(c))
                }
            }
            if !topLevel { throw Invalid(description: "glob '\(glob)' has a '{' without its '}'") }
            return nodes
        }

        /// After `[`: members up to `]`.
        mutating func parseClass() throws -> CharacterSet {
            var set = CharacterSet(ranges: [], negated: false)
            if at < scalars.count && (scalars[at] == "!" || scalars[at] == "^") { set.negated = true; at += 1 }
            var first = true
            while at < scalars.count {
                let c = scalars[at]
                if c == "]" && !first { at += 1; return set }
                if c == "[" && at + 1 < scalars.count && scalars[at + 1] == ":" {
                    throw Invalid(description: "glob '\(glob)' uses a named class ([:name:]), which is not supported: list the characters, e.g. [0-9]")
                }
                first = false
                at += 1
                if at + 1 < scalars.count && scalars[at] == "-" && scalars[at + 1] != "]" {
                    let end = scalars[at + 1]
                    guard c.value <= end.value else {
                        throw Invalid(description: "glob '\(glob)' has the range '\(c)-\(end)' backwards")
                    }
                    set.ranges.append(c.value...end.value)
                    at += 2
                } else {
                    set.ranges.append(c.value...c.value)
                }
            }
            throw Invalid(description: "glob '\(glob)' has a '[' without its ']'")
        }
    }

    /// Thompson's construction, into `program` at its end.
    private static func emit(_ nodes: [Node], into program: inout [Instruction]) {
        for node in nodes {
            switch node {
            case let .scalar(c): program.append(.scalar(c))
            case .question: program.append(.anyButSlash)
            case let .set(set): program.append(.set(set))
            case .star, .doubleStar:
                // L: split(L+1, L+3); L+1: one character; L+2: jump L; L+3: …
                let loop = program.count
                program.append(.split(loop + 1, loop + 3))
                program.append(node == .star ? .anyButSlash : .any)
                program.append(.jump(loop))
            case let .alternatives(alternatives):
                // Each but the last: split(here+1, next alternative); its nodes; jump end.
                var jumps: [Int] = []
                for (k, alternative) in alternatives.enumerated() {
                    let isLast = k == alternatives.count - 1
                    let split = program.count
                    if !isLast { program.append(.split(split + 1, -1)) }
                    emit(alternative, into: &program)
                    if !isLast {
                        jumps.append(program.count)
                        program.append(.jump(-1))
                        program[split] = .split(split + 1, program.count)
                    }
                }
                for j in jumps { program[j] = .jump(program.count) }
            }
        }
    }
}
