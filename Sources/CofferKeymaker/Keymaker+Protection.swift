extension Keymaker {
    /// The active strategies with the element behind each, sorted: `pin (TPM)`, `pin (software)`,
    /// `secure-element (TPM)`, `secure-element (software)`, or `none`. `coffer status` prints these, one-shot and
    /// through the agent alike.
    public func protectionDescriptions() throws(KeymakerError) -> [String] {
        let pin = try pinElement()
        return try strategies().map { strategy in
            switch strategy {
            case .pin: "\(strategy) (\(pin ?? .software))"
            case .secureElement: "\(strategy) (\(secureElementHolder() ?? "software"))"
            case .none: strategy.description
            }
        }.sorted()
    }
}
