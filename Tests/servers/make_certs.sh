#!/usr/bin/env bash
# usage: Tests/servers/make_certs.sh DIR [NAME]
# Makes the transport tests' certificates in DIR with the openssl command (NAME defaults to mail.coffer.test):
#   ca.pem/ca.key             the test CA
#   a.pem/a.key               server certificate A for NAME (RSA 2048), signed by the test CA
#   b.pem/b.key               server certificate B for NAME (EC P-256, another key), signed by the test CA
#   rogue-ca.pem, rogue.pem/rogue.key   a rogue CA and its certificate for the same NAME
#   backup.key                a spare key that no certificate uses (the backup pin)
#   X.pin                     the base64 SHA-256 of the DER SubjectPublicKeyInfo of each of the above
#   a-chain.pem, b-chain.pem, rogue-chain.pem   leaf followed by its CA
set -euo pipefail
dir="$1"; name="${2:-mail.coffer.test}"
mkdir -p "$dir"; cd "$dir"
cat > ca.ext <<EOT
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOT
cat > leaf.ext <<EOT
basicConstraints = critical, CA:FALSE
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:$name, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOT
ca() { # KEYFILE PEM SUBJECT
  openssl req -x509 -new -key "$1" -out "$2" -days 3650 -subj "$3" -extensions v3 \
    -config <(printf '[req]\ndistinguished_name=dn\n[dn]\n[v3]\n'; cat ca.ext) 2>/dev/null
}
leaf() { # KEY CAPEM CAKEY OUT
  openssl req -new -key "$1" -subj "/CN=$name" -out "$4.csr" 2>/dev/null
  openssl x509 -req -in "$4.csr" -CA "$2" -CAkey "$3" -CAcreateserial -out "$4" -days 825 -extfile leaf.ext 2>/dev/null
  rm -f "$4.csr"
}
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out ca.key 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rogue-ca.key 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out a.key 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out b.key 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rogue.key 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out backup.key 2>/dev/null
ca ca.key ca.pem "/CN=Coffer Test CA"
ca rogue-ca.key rogue-ca.pem "/CN=Coffer Rogue CA"
leaf a.key ca.pem ca.key a.pem
leaf b.key ca.pem ca.key b.pem
leaf rogue.key rogue-ca.pem rogue-ca.key rogue.pem
cat a.pem ca.pem > a-chain.pem; cat b.pem ca.pem > b-chain.pem; cat rogue.pem rogue-ca.pem > rogue-chain.pem
for k in ca rogue-ca a b rogue backup; do
  openssl pkey -in "$k.key" -pubout -outform der 2>/dev/null | openssl dgst -sha256 -binary | base64 > "$k.pin"
done
chmod 644 ./*.pem ./*.key ./*.pin
