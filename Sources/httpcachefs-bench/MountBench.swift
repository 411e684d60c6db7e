import ArgumentParser

// PLACEHOLDER: filled in by the owner of this benchmark.
struct MountBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "mount", abstract: "(not yet implemented)")
    func run() async throws {}
}
