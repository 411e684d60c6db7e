import ArgumentParser

/// Benchmarks: programs that print ratios against references measured in the same run.
@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "httpcachefs-bench",
        abstract: "Benchmarks for httpcachefs, each printing ratios against a reference measured in the same run.",
        subcommands: [CoreBench.self, MountBench.self, ProxyBench.self, DataPathBench.self, PlaybackBench.self, FlakyBench.self, ScaleBench.self, FleetBench.self, LibraryBench.self, BucketBench.self, ServeCommand.self]
    )
}
