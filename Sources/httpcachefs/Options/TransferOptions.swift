import ArgumentParser
import CacheCore
import Fetcher
import Settings

/// What the fetcher may take from the origins: across all of them `--max-connections` and
/// `--bwlimit`; from each `--max-connections-per-host`, `--tpslimit` (with `--tpslimit-burst`)
/// and `--egress-budget`. Part of `CacheOptions` (every subcommand), so `preload` and `cat` are
/// held to the same limits as a mount; through a running daemon, the daemon's limits apply.
struct TransferOptions: ParsableArguments {
    @Option(name: .customLong("max-connections"), parsing: .unconditional,
            help: ArgumentHelp("Most connections to origins at once, across all hosts; parallel streams and preloads share them (default: 16).", valueName: "n"))
    var maxConnections: String?

    @Option(name: .customLong("max-connections-per-host"), parsing: .unconditional,
            help: ArgumentHelp("Most transfers at once to one origin (scheme, host and port), within --max-connections (default: --max-connections).", valueName: "n"))
    var maxConnectionsPerHost: String?

    @Option(name: .customLong("tpslimit"), parsing: .unconditional,
            help: ArgumentHelp("Most requests per second to each origin host, e.g. 10 or 0.5 (0: no limit, the default); retries and redirects count (rclone name; rclone's limit is one for all hosts).", valueName: "n"))
    var tpsLimit: String?

    @Option(name: .customLong("tpslimit-burst"), parsing: .unconditional,
            help: ArgumentHelp("Most requests at once to an origin host after a quiet spell, under --tpslimit (default: 1).", valueName: "n"))
    var tpsLimitBurst: String?

    @Option(name: .customLong("egress-budget"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("Most bytes each origin may send per day, week or month, e.g. 1G/day, 100G/month or 100G/month@15 (resets on the 15th), from local midnight; \"ORIGIN SIZE/PERIOD\" for one origin (https://cdn.example.com 10G/month); repeatable. Near its end background readers stop first, then scanners; once spent, reads that need the origin fail (cached bytes are served) until it resets. The use is kept across restarts.", valueName: "size/period"))
    var egressBudgets: [String] = []

    @Option(name: .customLong("bwlimit"), parsing: .unconditional,
            help: ArgumentHelp("Most bytes per second taken from origins, across all transfers, e.g. 10M or 500K (0: no limit, the default); or a timetable as rclone writes it, \"08:00,512K 23:00,off\" (Mon-08:00,... for days of the week), in local time.", valueName: "rate"))
    var bandwidthLimit: String?

    @Option(name: .customLong("tier"),
            help: ArgumentHelp("Fetch misses of URLs under ORIGIN (scheme, host, port, optional path prefix) from a cache tier of nginx nodes (mount-helpers/tier.sh): ORIGIN=NODE[,NODE...][,slice=4M]; repeatable. Open-time checks still go to the origin; a node that fails is skipped and the origin serves its slices.", valueName: "origin=node,..."))
    var tiers: [String] = []

    init() {}

    struct Resolved: Equatable {
        var maxConnections = 16
        /// `--max-connections-per-host`; nil: `maxConnections`.
        var maxConnectionsPerHost: Int?
        /// `--tpslimit`: requests per second per origin; 0: no limit.
        var requestsPerSecond: Double = 0
        var requestBurst = 1
        /// 0: no limit.
        var bytesPerSecond: Int64 = 0
        /// A timetable instead of one rate.
        var timetable: BandwidthTimetable?
        /// `--egress-budget`.
        var egressBudgets = EgressLedger.Rules()
        /// `--tier`: origins whose misses go to a cache tier.
        var tiers: [TierSpec] = []

        /// A reader never asks for more parallel streams than there are connections.
        /// (A file's streams all go to its origin, so the per-host cap bounds them too.)
        func apply(to c: inout CacheConfiguration) {
            c.maxStreams = min(c.maxStreams, perHost)
        }

        /// Connections to one host: the per-host cap, never above the total.
        var perHost: Int { min(maxConnections, maxConnectionsPerHost ?? maxConnections) }

        func apply(to c: inout FetcherConfiguration) {
            c.maxTotalConnections = maxConnections
            c.maxConnections = perHost
            c.maxTransfersPerOrigin = maxConnectionsPerHost.map { _ in perHost }
            c.requestsPerSecond = requestsPerSecond
            c.requestBurst = requestBurst
            c.maxBytesPerSecond = bytesPerSecond
            c.bandwidthTimetable = timetable
        }
    }

    /// The values from the flags, else the config file (`pick` gives the text and how to name it;
    /// `fileTiers` are the file's `tier` lines, used when no `--tier` flag is given).
    func resolve(_ pick: (String?, String) -> (text: String, option: String)?, fileTiers: [String] = [],
                 fileBudgets: [String] = [], filePath: String? = nil) throws -> Resolved {
        var r = Resolved()
        let budgetTexts = egressBudgets.isEmpty ? fileBudgets : egressBudgets
        let budgetOption = egressBudgets.isEmpty ? "'egress-budget' in \(filePath ?? "the config file")" : "--egress-budget"
        r.egressBudgets = try Self.budgetRules(budgetTexts, option: budgetOption)
        let tierTexts = tiers.isEmpty ? fileTiers : tiers
        let tierOption = tiers.isEmpty ? "'tier' in \(filePath ?? "the config file")" : "--tier"
        for text in tierTexts {
            do { r.tiers.append(try TierSpec.parse(text)) } catch {
                throw UsageError("\(error.description) for \(tierOption)")
            }
        }
        if let v = pick(maxConnections, "max-connections") {
            guard let n = Int(v.text.trimmingCharacters(in: .whitespaces)), (1...1024).contains(n) else {
                throw UsageError("invalid connection count '\(v.text)' for \(v.option): expected a whole number from 1 to 1024")
            }
            r.maxConnections = n
        }
        if let v = pick(maxConnectionsPerHost, "max-connections-per-host") {
            guard let n = Int(v.text.trimmingCharacters(in: .whitespaces)), (1...1024).contains(n) else {
                throw UsageError("invalid connection count '\(v.text)' for \(v.option): expected a whole number from 1 to 1024")
            }
            r.maxConnectionsPerHost = n
        }
        if let v = pick(tpsLimit, "tpslimit") {
            // rclone's: a float, 0 for no limit.
            let t = v.text.trimmingCharacters(in: .whitespaces)
            guard let n = Double(t), n.isFinite, n >= 0, n <= 1_000_000 else {
                throw UsageError("invalid request rate '\(v.text)' for \(v.option): expected requests per second, e.g. 10 or 0.5 (0: no limit)")
            }
            r.requestsPerSecond = n
        }
        if let v = pick(tpsLimitBurst, "tpslimit-burst") {
            // rclone takes a burst below 1 as 1.
            guard let n = Int(v.text.trimmingCharacters(in: .whitespaces)), (0...100_000).contains(n) else {
                throw UsageError("invalid burst '\(v.text)' for \(v.option): expected a whole number of requests, e.g. 1 (the default) or 10")
            }
            r.requestBurst = max(1, n)
        }
        if let v = pick(bandwidthLimit, "bwlimit") {
            // "10M" and "10M/s" both mean 10 MiB per second; "08:00,512K 23:00,off" changes.
            switch try BandwidthLimitValue.parse(v.text, option: v.option) {
            case let .constant(rate):
                r.bytesPerSecond = rate
            case let .timetable(weekly, entries):
                r.timetable = BandwidthTimetable(entries: entries, weekly: weekly)
            }
        }
        return r
    }

    /// The budgets of `texts`: one for every origin at most, and one per origin at most.
    static func budgetRules(_ texts: [String], option: String) throws -> EgressLedger.Rules {
        var rules = EgressLedger.Rules()
        for text in texts {
            let v = try EgressBudgetValue.parse(text, option: option)
            let period: EgressPeriod
            switch v.period {
            case .day: period = .day
            case .week: period = .week
            case let .month(d): period = .month(resetDay: d)
            }
            let budget = EgressBudget(bytes: v.bytes, period: period)
            if let origin = v.origin {
                guard let key = EgressLedger.originKey(of: origin) else {
                    throw UsageError("invalid origin '\(origin)' in the egress budget for \(option)")
                }
                guard rules.origins[key] == nil else {
                    throw UsageError("two egress budgets for \(key) in \(option): give one")
                }
                rules.origins[key] = budget
            } else {
                guard rules.everyOrigin == nil else {
                    throw UsageError("two egress budgets for every origin in \(option): give one (ORIGIN SIZE/PERIOD for one origin)")
                }
                rules.everyOrigin = budget
            }
        }
        return rules
    }
}
