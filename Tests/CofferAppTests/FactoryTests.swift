import CofferApp
import Dispatch
import Foundation
import NIOConcurrencyHelpers
import Testing

private final class Widget: Sendable {}

private final class Holder: Sendable {
    let storage: FactoryStorage
    init(_ level: FactoryStorage.Level) { storage = FactoryStorage(level: level) }
    var uniqueFactory: Factory<Widget> { Factory(storage, scope: .unique) { Widget() } }
    var sharedFactory: Factory<Widget> { Factory(storage, scope: .shared) { Widget() } }
    let slowMade = NIOLockedValueBox(0)
    /// A shared factory whose instance takes a tenth of a second to make (as a store's open does).
    var slowFactory: Factory<Widget> {
        Factory(storage, scope: .shared) { [self] in
            slowMade.withLockedValue { $0 += 1 }
            Thread.sleep(forTimeInterval: 0.1)
            return Widget()
        }
    }
}

@Suite struct FactoryTests {
    @Test func aUniqueFactoryMakesANewInstanceEachTime() throws {
        let holder = Holder(.global)
        #expect(try holder.uniqueFactory() !== holder.uniqueFactory())
    }

    @Test func aSharedFactoryKeepsOneInstancePerContainer() throws {
        let one = Holder(.global)
        let other = Holder(.global)
        #expect(try one.sharedFactory() === one.sharedFactory())
        #expect(try one.sharedFactory() !== other.sharedFactory())
    }

    @Test func callersThatArriveWhileTheInstanceIsMadeWaitForIt() throws {
        let holder = Holder(.global)
        let got = NIOLockedValueBox<[ObjectIdentifier]>([])
        DispatchQueue.concurrentPerform(iterations: 6) { _ in
            if let widget = try? holder.slowFactory() { got.withLockedValue { $0.append(ObjectIdentifier(widget)) } }
        }
        let made = holder.slowMade.withLockedValue { $0 }
        #expect(made == 1, "a second instance was made while the first was being made")
        let instances = got.withLockedValue { $0 }
        #expect(Set(instances).count == 1 && instances.count == 6)
    }

    @Test func perUserInstancesAreSharedWithinAnAccountAndDistinctAcrossAccounts() throws {
        let app = TestApp()
        let registry = try app.global.keymakerRegistry
        let alice = registry.user("alice")
        #expect(registry.user("alice") === alice)
        #expect(try alice.keymaker === alice.keymaker)
        #expect(try alice.keymaker !== registry.user("bob").keymaker)
        #expect(try app.global.keymakerRegistry === registry)
    }

    @Test func registerReplacesTheInstanceAndResetRestoresTheFactory() throws {
        let holder = Holder(.global)
        let original = try holder.sharedFactory()
        let double = Widget()
        holder.sharedFactory.register { double }
        #expect(try holder.sharedFactory() === double)
        holder.sharedFactory.reset()
        let remade = try holder.sharedFactory()
        #expect(remade !== double && remade !== original)
    }

    @Test func nothingIsMadeUntilResolved() throws {
        let app = TestApp()
        let user = try app.global.keymakerRegistry.user("carol")
        #expect(!user.hasOpenedMailStore)
        #expect(!user.storage.contains("attachmentCacheFactory"))
    }
}
