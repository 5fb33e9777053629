/// AppPaths moved to the agent protocol (a client finds the agent socket by it): it stays visible to every file that
/// imports this module.
@_exported import CofferAgentProtocol
