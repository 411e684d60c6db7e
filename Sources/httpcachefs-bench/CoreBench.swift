import ArgumentParser

// PLACEHOLDER: filled in by the owner of this benchmark.
struct CoreBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "core", abstract: "(not yet implemented)")
    func run() async throws {}
}
