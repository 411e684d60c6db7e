import ArgumentParser

// PLACEHOLDER: filled in by the owner of this command.
struct URLCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "url", abstract: "(not yet implemented)")
    func run() async throws { throw ValidationError("not yet implemented") }
}
