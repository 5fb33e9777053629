import ArgumentParser
import CofferCrypto
import Logging

/// The `coffer` command: the MainKey protection system and, as later modules land, the mail store around it.
@main
struct Coffer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coffer",
        abstract: "Keeps a mail client's local data sealed under a per-account MainKey.",
        discussion: """
            Without a command, coffer runs a short tour on a throwaway home folder.
            Data lives under --home or $COFFER_HOME, else the XDG folders (~/.local/share/coffer, \
            ~/.local/state/coffer).
            """,
        subcommands: [
            Tour.self, Init.self, Protect.self, Unlock.self, Lock.self, Status.self, AutolockCommand.self,
            Logout.self, AgentCommand.self, BackgroundCommand.self, ImportCommand.self, ListCommand.self,
            ShowCommand.self, SearchCommand.self,
            AttachmentsCommand.self, AttachmentCommand.self, RenderCommand.self,
            PinCommand.self, AccountCommand.self, SyncCommand.self, NotifyCommand.self, PushHandlerCommand.self,
            FastSyncCommand.self, ComposeCommand.self, ReplyCommand.self, ForwardCommand.self, SendCommand.self,
            DraftsCommand.self, OutboxCommand.self, ContactsCommand.self, KeyCommand.self,
        ],
        defaultSubcommand: Tour.self
    )

    /// Applies Coffer's process settings, then parses and runs the command.
    static func main() async {
        ProcessSettings.tuneAllocator()
        ProcessSettings.hardenMemory()
        // Library warnings (key memory that could not be locked) reach the person on standard error; the agent
        // replaces this with its own logger.
        var warnings = Logger(label: "coffer") { label in StreamLogHandler.standardError(label: label) }
        warnings.logLevel = .warning
        SecretBytes.logger = warnings
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}
