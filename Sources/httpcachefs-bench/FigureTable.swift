import Foundation

/// One measured figure: what was measured, the reference it is compared with (measured in the
/// same run), their ratio and the target the ratio should meet.
struct Figure {
    enum Target {
        case atMost(Double)
        case atLeast(Double)
        case within(Double, Double)

        func isMet(by x: Double) -> Bool {
            switch self {
            case let .atMost(t): return x <= t
            case let .atLeast(t): return x >= t
            case let .within(lo, hi): return lo <= x && x <= hi
            }
        }

        var text: String {
            switch self {
            case let .atMost(t): return "<= \(Figure.number(t))"
            case let .atLeast(t): return ">= \(Figure.number(t))"
            case let .within(lo, hi): return "\(Figure.number(lo))-\(Figure.number(hi))"
            }
        }
    }

    var name: String
    var measured: String
    var reference: String
    var ratio: Double?
    var unit: String
    var target: Target?
    /// Decimals of the ratio below 10 (a ratio that must be exactly 1 needs more than 3).
    var digits = 3
    /// Printed under the table: what to look at when the figure is off.
    var note: String? = nil

    static func number(_ x: Double, digits: Int = 3) -> String {
        x >= 10 ? String(format: "%.1f", x) : String(format: "%.\(digits)f", x)
    }
}

/// The figures of a run, in order, rendered as one table; a figure that fails or cannot run
/// gets a row saying why, and the run goes on.
struct FigureTable {
    private var figures: [Figure] = []
    /// The figures asked for (`--only`): a measurement none of them needs does not run.
    let only: Set<DataPathFigure>

    init(only: Set<DataPathFigure> = Set(DataPathFigure.allCases)) { self.only = only }

    /// Runs `body` if one of `needed` is asked for (a reference serves every figure that needs it).
    mutating func measure(_ needed: Set<DataPathFigure>, _ name: String, _ body: () throws -> [Figure]) {
        guard !only.isDisjoint(with: needed) else { return }
        Self.progress(name + "...")
        do {
            figures += try body()
        } catch {
            // The first line in the table, any detail (a log, `cache info`) under it.
            let lines = "\(error)".split(separator: "\n", omittingEmptySubsequences: false)
            let reason = String(lines.first ?? "")
            figures.append(Figure(name: name, measured: reason.hasPrefix("skipped") ? reason : "failed: \(reason)",
                                  reference: "", ratio: nil, unit: "", target: nil,
                                  note: lines.count > 1 ? "\n" + lines.dropFirst().joined(separator: "\n") : nil))
        }
    }

    /// A line on stderr, so a long run shows where it is without mixing into the table.
    static func progress(_ text: String, bench: String = "datapath") {
        FileHandle.standardError.write(Data("\(bench): \(text)\n".utf8))
    }

    func render() -> String {
        var rows = [["figure", "measured", "reference (same run)", "ratio", "target", ""]]
        for f in figures {
            let ratio = f.ratio.map { Figure.number($0, digits: f.digits) + " " + f.unit } ?? ""
            let target = f.target.map { $0.text + " " + f.unit } ?? ""
            let verdict = f.ratio.flatMap { r in f.target.map { $0.isMet(by: r) ? "met" : "MISSED" } } ?? ""
            rows.append([f.name, f.measured, f.reference, ratio, target, verdict])
        }
        let notes = figures.compactMap { f in f.note.map { "note on '\(f.name)': \($0)" } }
        return ([CoreBench.table(rows)] + notes).joined(separator: "\n")
    }
}
