#include "csign.h"
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

int csign_ed25519(const char *key_path, const unsigned char *data, size_t length,
                  unsigned char signature[64], char *error, size_t error_size) {
    FILE *file = fopen(key_path, "rb");
    if (!file) {
        snprintf(error, error_size, "%s: cannot be opened", key_path);
        return -1;
    }
    EVP_PKEY *key = PEM_read_PrivateKey(file, NULL, NULL, NULL);
    fclose(file);
    if (!key) return fail(error, error_size, "not a PEM private key (openssl genpkey -algorithm ed25519 makes one)");
    if (EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(key);
        snprintf(error, error_size, "the key is not Ed25519 (openssl genpkey -algorithm ed25519 makes one)");
        return -1;
    }
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    size_t size = 64;
    int ok = context && EVP_DigestSignInit(context, NULL, NULL, NULL, key) == 1
             && EVP_DigestSign(context, signature, &size, data, length) == 1 && size == 64;
    EVP_MD_CTX_free(context);
    EVP_PKEY_free(key);
    return ok ? 0 : fail(error, error_size, "signing failed");
}
