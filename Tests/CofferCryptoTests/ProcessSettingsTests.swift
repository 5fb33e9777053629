import CofferCrypto
import Testing

@Suite struct ProcessSettingsTests {
    @Test func hardeningMakesTheProcessNotDumpable() {
        #expect(ProcessSettings.hardenMemory())
        #expect(!ProcessSettings.isDumpable)
    }

    @Test func allocatorTuningIsAccepted() {
        #expect(ProcessSettings.tuneAllocator())
    }
}
