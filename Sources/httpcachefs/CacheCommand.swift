import ArgumentParser

// PLACEHOLDER: filled in by the owner of this command.
struct CacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "cache", abstract: "(not yet implemented)")
    func run() async throws { throw ValidationError("not yet implemented") }
}
