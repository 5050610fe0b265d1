/* SHA256_Init/Update/Final: OpenSSL 3 deprecates them for EVP, but they are its own
 * implementation without the provider machinery: EVP_Digest's first call initialises
 * libcrypto (configuration, providers, error strings: 1.4 MiB resident in the daemon), which
 * the daemon, that never signs, does not need for a hash a play. */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include "csign.h"
#include <openssl/sha.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <string.h>

static int fail(char *error, size_t size, const char *what) {
    unsigned long code = ERR_get_error();
    char reason[160] = "";
    if (code) ERR_error_string_n(code, reason, sizeof reason);
    snprintf(error, size, "%s%s%s", what, code ? ": " : "", reason);
    ERR_clear_error();
    return -1;
}

/* The Ed25519 key (private, or public) in the PEM file at `path`, or NULL and a sentence in `error`. */
static EVP_PKEY *read_key(const char *path, int public_key, char *error, size_t error_size) {
    FILE *file = fopen(path, "rb");
    if (!file) {
        snprintf(error, error_size, "%s: cannot be opened", path);
        return NULL;
    }
    EVP_PKEY *key = public_key ? PEM_read_PUBKEY(file, NULL, NULL, NULL) : PEM_read_PrivateKey(file, NULL, NULL, NULL);
    fclose(file);
    if (!key) {
        fail(error, error_size, public_key ? "not a PEM public key (openssl pkey -in KEY -pubout makes one)"
                                           : "not a PEM private key (openssl genpkey -algorithm ed25519 makes one)");
        return NULL;
    }
    if (EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(key);
        snprintf(error, error_size, "the key is not Ed25519 (openssl genpkey -algorithm ed25519 makes one)");
        return NULL;
    }
    return key;
}

int csign_ed25519(const char *key_path, const unsigned char *data, size_t length,
                  unsigned char signature[64], char *error, size_t error_size) {
    EVP_PKEY *key = read_key(key_path, 0, error, error_size);
    if (!key) return -1;
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    size_t size = 64;
    int ok = context && EVP_DigestSignInit(context, NULL, NULL, NULL, key) == 1
             && EVP_DigestSign(context, signature, &size, data, length) == 1 && size == 64;
    EVP_MD_CTX_free(context);
    EVP_PKEY_free(key);
    return ok ? 0 : fail(error, error_size, "signing failed");
}

int csign_ed25519_verify(const char *public_key_path, const unsigned char *data, size_t length,
                         const unsigned char *signature, size_t signature_length, char *error, size_t error_size) {
    EVP_PKEY *key = read_key(public_key_path, 1, error, error_size);
    if (!key) return -1;
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    int rc = -1;
    if (context && EVP_DigestVerifyInit(context, NULL, NULL, NULL, key) == 1) {
        int verified = EVP_DigestVerify(context, signature, signature_length, data, length);
        if (verified == 1) rc = 0;
        else {
            ERR_clear_error();
            snprintf(error, error_size, "the signature does not match the file's bytes");
            rc = 1;
        }
    } else {
        rc = fail(error, error_size, "verifying failed");
    }
    EVP_MD_CTX_free(context);
    EVP_PKEY_free(key);
    return rc;
}

int csign_sha256(const unsigned char *data, size_t length, unsigned char digest[32]) {
    SHA256_CTX context;
    if (SHA256_Init(&context) != 1 || SHA256_Update(&context, data, length) != 1 || SHA256_Final(digest, &context) != 1) return -1;
    return 0;
}
