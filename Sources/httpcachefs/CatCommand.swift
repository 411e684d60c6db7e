import ArgumentParser

// PLACEHOLDER: filled in by the owner of this command.
struct CatCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "cat", abstract: "(not yet implemented)")
    func run() async throws { throw ValidationError("not yet implemented") }
}
