import CofferCrypto
import Testing

/// Envelopes written by the seal code of commit c9d826b (before seal drew its nonce into the header and wrote into
/// one allocation), through the public API with random nonces, stored here as they were written. They must open for
/// ever: the format does not change with the code that writes it.
@Suite struct EnvelopeCompatibilityTests {
    /// The root key those envelopes were sealed under: bytes `i * 7 + 3`.
    static let rootKey: [UInt8] = (0..<32).map { UInt8($0 &* 7 &+ 3) }

    struct Stored: Sendable, CustomTestStringConvertible {
        var algorithm: EnvelopeAlgorithm
        var size: Int
        var hex: String

        var bytes: [UInt8] { [UInt8](hexString: hex.filter { !$0.isWhitespace })! }
        /// What was sealed: bytes `i * 31 + 5`.
        var plaintext: [UInt8] { (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) } }
        var context: EnvelopeContext { ["compat", "v1", "\(algorithm.rawValue)", "\(size)"] }
        var testDescription: String { "\(algorithm), \(size) bytes" }
    }

    static let stored: [Stored] = [
        Stored(
            algorithm: .aes256GCM,
            size: 0,
            hex: """
                434645560101e6b5ebdb45c90fc296ef0aace17a27094265f4fc1714fb0744ff55bbae24e9833e2c86316b97a4871dad
                0c06
                """
        ),
        Stored(
            algorithm: .aes256GCM,
            size: 13,
            hex: """
                434645560101e6b5ebdb45c90fc26e982ddc7fedb34c799eb306e71c19e890d450dc5883227f035f5e56e6a1f57e07db
                d480223da5352aecae2c127335fc75
                """
        ),
        Stored(
            algorithm: .aes256GCM,
            size: 1024,
            hex: """
                434645560101e6b5ebdb45c90fc29b1eb4f5a12a3aa7e6ad18cec8d7152e43c39b4641f0dce52852667d5611ef1728de
                37f657ef766852ef8f2265cf4fd01da38ce5bfe71faa3096c665c7c193c4217e5cf814c21b829004bcb25ed901ee9509
                f57224128ae3985eb73293ab1a9357daeb98437d6635002e4b08273656f86cf508d0f54be2e919c2b9bc3062f288d332
                bea6e7057dc00e5d5dd50ed40c6b35ebf40223fbd52412a835b8e429ca4b9fd400c9bc28887e0cc9620627a9099c3196
                5c0c9aa54516e238952e2c78ced1a989995faf42124edba6e71840ffed0e9a61c07844bb3f3e0f2928a08357d8e2aef5
                6e71ea39e711fa4d9c54a49bd6bab6c438bebe402c39613f9386e125ff5c0ff45a45c2697f6828bcd3df22bd11412acc
                9cc6dab061e068982ef5c4118e4a2d57596b0e984ec9c39fe8726e7450a11af6167b54f75574e4332890b36022716ecd
                b83480845500b9da1c6fcd258ce720d1c93ae9db5cee28b55873cb29e126aeee847d8c68a258fa6dbe54d85647027857
                1a0d7a760e5cfbe53a755218afb3a9d21f5406a96ebfcc368b5683455240657b132f2b2de61023a99a268c4f197f33c0
                84d1d94b98a32243e243bb3f845c4552e986da2cef2f694e4bdbb6f0f560c7497d5a1c45e6c59d15864f0c2b1eda249e
                fdb42d876e4838afc2c0b7a0e6efe813e235f7386ed3a863b3826bc7587a0d65da40a00a6a4b46e60e7835484a2623bd
                d4faee0b3e4ca5b97d76588c2542b5ae1785019d5be5f7fce6b8e46e9ef31b548240331c2d4281beecd645535426d6a4
                7cecfcf5ad48ce7ac826a8b0d71e5da17994eaa1711d885b81f206a9d74ee9bb36ab8034ea70a28bff35041420445a9a
                bd5ead49c9a6ca7734ee5b78c3ffec61808f01e7d0fe7cac6ebb11606fe60f3fa45f1ee38077b31221803046535d582d
                39a9b03a5b0a669875e4434eaa59f0f63fb8cd7c47aad59b50dbe5bde037931bf9a92d87b9d6377a5eebe6de5c1e53e5
                0046278b099dd90af579a267449eb71415ce849cd1b61f2b00819ecd3cbb3bfd1553698af8ce792e3e1c582cac2ab85b
                16805efccbbe941b241665900089b5c614df2de5945fc62e89ee8edfc40a174fe643972fe45799e602d19328751f25c2
                7d5326b081f83bc3eba26092896a1ffc897d8c7c3468396a4de7d67f4b6cdf975496e788e3fbf9e52def01caececb4a1
                c8c2a4c58f69c50cd8a1dca9462589483e4e8747f775ecb4128e9433efbc71831404f30eb52a3a2f1459c3ecfb312230
                508e2ac34fc543840c7ace604ad3ad9f288a8eba3e270d9068ffddf51eb7321449da29856c9fcefcaa47ffa1a20b52bd
                a83bc37b9ed2d2c4710e88f7b9645936355ca52263d704069e164250b0641aa620de3f48984a6050d68243b14772b04e
                24b12e38940cf1203ef0db11376e789383f30a4a3ea9aadb7b432a17f4e39b3ab2996ce7b7348f4cad885a76fba50355
                c231c4caefbf376b62169a6bfa52c82eb1a3
                """
        ),
        Stored(
            algorithm: .chaCha20Poly1305,
            size: 0,
            hex: """
                434645560102e6b5ebdb45c90fc2e974836ef096ff6992da33d0761bf5c6f98d30ccc507b11267b44413fe2972f87b9b
                5f89
                """
        ),
        Stored(
            algorithm: .chaCha20Poly1305,
            size: 13,
            hex: """
                434645560102e6b5ebdb45c90fc212d74f1db92fe5bd17c23b1d706985cf3e1cb558a1a8876678029f1524d6a6d6427f
                a31630bf99af7a3490a938b122031a
                """
        ),
        Stored(
            algorithm: .chaCha20Poly1305,
            size: 1024,
            hex: """
                434645560102e6b5ebdb45c90fc257edf4d748dd38e3c9968dbe46ec234872f6f6cb1ddb8de898f1481da8558aba5d2a
                4e792c134e08ec1d7cbc526d052ad979216780d44d08004e7ecadf779bedb52345e5da94e481445053706980586605e0
                9d0f6c1f3c3e1775e69a54e8dbd4d11651c0910260ddc4579943135a3902ffe7271a750944e8b36e621432185c4366c3
                eb4d6bf75ffdf09f27461cad8245615d21c0d4d95008b502503bbbabf0d1bb51cf5089765a176a28d3cd86df6e672fdf
                7cea910cfb21151a48d4610a9377a7b68a437d257bc540a9c38a1140bfb2463e43f6f94dc34f47d4422955a7a681aec1
                57c29ac79a0e98730e2ee149d0d6a2de100fc54cb1d76e6172e823e2be61824d48d63e9b02660dd06b157ccc01a3809f
                87553daddb71a67564ff6a88c58908e7316d88ffc62c118da65c58775ed70032cdac9a63f36dcfe51a783afde7ddfdac
                f5fe0bf74cd1075b5da3c05e3cfef1130f7190b2a0457b6e56ef2004ee015b728ec698e3c9f976c0a45cd8f2ea9f986b
                0449d64c64ed6d0202a625d5ce21ee2911460d71b4c4c02bdefc162c35a66efee63a5eb49b9747c3f2724fc86cecf60f
                bb542559dfeb4b967a2c025d9038e3cb53789b3a8e723d2dd986e1690c24d213b1a3e6a8f532a933f96d7fbb81b5e2cd
                233e658ad46fc96cad10493abee81ed8b735f9c67801f73b6bb4c3e807e91a7cc72ae6ed408302bb1baa6fc89487636c
                6aa6fb2dc9fc0ff6d96d024f377a95ceacdd7f58c6f6e0f95067df19c8cf3cde198cde17dad44c483466b558b3dbe0f7
                4f56662933ce0bf92d805a9121cd6d5159f8c073033f6fe13cc90f64dfb65713b5422aafff09ce1b49c09433a0d5904a
                84218e886564cfd18fca5a4d5ab338b2fca7c1c23da08649c31d2abbbd40fca61a39ffbd3f6f5d0ae2dbd1308d31035d
                7be811bb15ad594d7c26012b4f5c46d2ef96b2be5638391c43c93d9ff37000ebba3ff5e227ca18134301991ce4ec3052
                1e2eb8cd82f814bbfaaa020923d9ec3067d6d3f9ce8b97667f76f30f1965d8fd5dd18b8818674f19a666c97bec925bf6
                8154d16c53028c1ed4466c02d9df8a5b2f51eb0e0620b81d8471e0bbe03144614a55db96ebc9eb8b4a08c773693445e2
                3ea70e513df72e1d2d6a6c146ff50078a36fba126494d2848416b534b5d62d29f8aeb0adac95b27a2295799d64e87211
                6f21f31b6863a2f9557c55ce1c8beb73ae46541d7f3041d23188b75d9e58981318cd08e58885184103acfd54687b2fdc
                927593921b21a7cf34c1a42e21080636e5dad3f63c42ed233c1ec1b2392bab0a8df9310a7d8af00d79967bb85103902f
                8a3f3386618609c1f194026796633824deabefe2cef4f8007189c9ef54cceba6a4034988a51a10ce6f49afb7893d7ce8
                417aa1a8d464deeb2776eeadab0d4806eb3e46c4238110055129aaac9a80a0449ce3c97feabdccc43766c007f9a934d2
                49725960d8a2a9d8f09d240e3091cb407a78
                """
        ),
    ]

    @Test(arguments: stored)
    func envelopeFromTheOldSealStillOpens(envelope: Stored) throws {
        let key = try EnvelopeKey(SecretBytes(copying: Self.rootKey))
        let bytes = envelope.bytes
        #expect(bytes.count == envelope.size + Envelope.overhead)
        #expect(try Envelope.inspect(bytes).algorithm == envelope.algorithm)
        #expect(try Envelope.open(bytes, with: key, context: envelope.context) == envelope.plaintext)
        #expect(
            try Envelope.openSecret(bytes, with: key, context: envelope.context).withUnsafeBytes { Array($0) }
                == envelope.plaintext
        )
    }

    /// The stored bytes are the test's own evidence: one flipped bit in any of them, or another context, and they
    /// no longer open.
    @Test(arguments: stored)
    func storedEnvelopeIsCheckedNotTrusted(envelope: Stored) throws {
        let key = try EnvelopeKey(SecretBytes(copying: Self.rootKey))
        var damaged = envelope.bytes
        damaged[damaged.count - 1] ^= 0x01
        #expect(throws: CofferCryptoError.authenticationFailed) {
            try Envelope.open(damaged, with: key, context: envelope.context)
        }
        #expect(throws: CofferCryptoError.wrongContext) {
            try Envelope.open(envelope.bytes, with: key, context: envelope.context.appending("other"))
        }
    }

    /// The new seal writes what the old one wrote: with the stored envelope's nonce, the same bytes.
    @Test(arguments: stored)
    func newSealWritesTheSameBytes(envelope: Stored) throws {
        let key = try EnvelopeKey(SecretBytes(copying: Self.rootKey))
        let old = envelope.bytes
        let resealed = try envelope.plaintext.withUnsafeBytes { raw in
            try Envelope.seal(
                raw,
                with: key,
                context: envelope.context,
                algorithm: envelope.algorithm,
                nonce: Array(old[22..<34])
            )
        }
        #expect(resealed == old)
    }
}
