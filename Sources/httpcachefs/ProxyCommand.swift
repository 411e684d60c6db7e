import ArgumentParser

// PLACEHOLDER: filled in by the owner of this command.
struct ProxyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "proxy", abstract: "(not yet implemented)")
    func run() async throws { throw ValidationError("not yet implemented") }
}
