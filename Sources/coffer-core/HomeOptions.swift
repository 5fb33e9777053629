import ArgumentParser
import CofferAgentProtocol
import CofferApp
import CofferCommandLine
import CofferReading

#if canImport(Glibc)
import Glibc
#endif

/// How a server is trusted: `coffer account add` and `coffer notify register` take the same three options.
struct PinnedServerOptions: ParsableArguments {
    @Option(name: .customLong("pin-sha256"), help: "An SPKI pin (base64 SHA-256); repeat for the backup key.")
    var pins: [String] = []
    @Option(name: .customLong("ca-file"), help: "Trust only the CAs of this PEM bundle (else the system's).")
    var caFile: String?
    @Option(name: .long, help: "Connect to this address instead of HOST (the certificate must still name HOST).")
    var connect: String?

    /// A pin set needs a backup: at least two pins, or none.
    func validate() throws {
        if !pins.isEmpty && pins.count < 2 {
            throw ValidationError(
                "Give at least two --pin-sha256: the server's key and a backup key it does not use yet."
            )
        }
    }

    /// The CA bundle's absolute path (the agent may run in another folder).
    var absoluteCAFile: String? { caFile.map(absolutePath) }
}
