import ArgumentParser

// PLACEHOLDER: filled in by the owner of this benchmark.
struct ProxyBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "proxy", abstract: "(not yet implemented)")
    func run() async throws {}
}
