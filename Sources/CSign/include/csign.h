#ifndef ADPLAYERD_CSIGN_H
#define ADPLAYERD_CSIGN_H
#include <stddef.h>

/* Signs `length` bytes with the Ed25519 private key in the PEM file `key_path` (OpenSSL's
 * libcrypto): the 64-byte signature in `signature` (room for 64), 0 on success; otherwise -1
 * and a sentence in `error` (room for `error_size` bytes). The key must be Ed25519: any
 * other kind is refused, so that `openssl pkeyutl -verify -rawin` checks what was made. */
int csign_ed25519(const char *key_path, const unsigned char *data, size_t length,
                  unsigned char signature[64], char *error, size_t error_size);

/* Checks a detached Ed25519 signature of `length` bytes with the PEM public key at
 * `public_key_path`: 0 when it matches, 1 when it does not (a sentence in `error`), -1 when
 * it cannot be checked (no key, not Ed25519; a sentence in `error`). */
int csign_ed25519_verify(const char *public_key_path, const unsigned char *data, size_t length,
                         const unsigned char *signature, size_t signature_length, char *error, size_t error_size);

/* SHA-256 of `length` bytes into `digest` (32 bytes): the ledger's chain (OpenSSL's libcrypto,
 * the library that signs its exports). 0 on success, -1 if libcrypto cannot. */
int csign_sha256(const unsigned char *data, size_t length, unsigned char digest[32]);

#endif
