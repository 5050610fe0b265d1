#ifndef ADPLAYERD_CSIGN_H
#define ADPLAYERD_CSIGN_H
#include <stddef.h>

/* Signs `length` bytes with the Ed25519 private key in the PEM file `key_path` (OpenSSL's
 * libcrypto): the 64-byte signature in `signature` (room for 64), 0 on success; otherwise -1
 * and a sentence in `error` (room for `error_size` bytes). The key must be Ed25519: any
 * other kind is refused, so that `openssl pkeyutl -verify -rawin` checks what was made. */
int csign_ed25519(const char *key_path, const unsigned char *data, size_t length,
                  unsigned char signature[64], char *error, size_t error_size);

#endif
