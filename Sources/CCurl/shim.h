#ifndef ADPLAYERD_CCURL_SHIM_H
#define ADPLAYERD_CCURL_SHIM_H
/* libcurl's easy interface: the one bounded HTTP reader (AdSources/BoundedHTTP.swift).
   curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: typed
   wrappers, one per kind of argument. */
#include <curl/curl.h>

typedef size_t (*ccurl_write_fn)(char *data, size_t size, size_t count, void *context);
typedef int (*ccurl_progress_fn)(void *context, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode ccurl_set_long(CURL *curl, CURLoption option, long value) { return curl_easy_setopt(curl, option, value); }
static inline CURLcode ccurl_set_off(CURL *curl, CURLoption option, curl_off_t value) { return curl_easy_setopt(curl, option, value); }
static inline CURLcode ccurl_set_string(CURL *curl, CURLoption option, const char *value) { return curl_easy_setopt(curl, option, value); }
static inline CURLcode ccurl_set_pointer(CURL *curl, CURLoption option, void *value) { return curl_easy_setopt(curl, option, value); }
static inline CURLcode ccurl_set_list(CURL *curl, CURLoption option, struct curl_slist *value) { return curl_easy_setopt(curl, option, value); }
static inline CURLcode ccurl_set_write(CURL *curl, ccurl_write_fn fn) { return curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, fn); }
static inline CURLcode ccurl_set_progress(CURL *curl, ccurl_progress_fn fn) { return curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, fn); }
static inline long ccurl_response_code(CURL *curl) { long code = 0; curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code); return code; }
static inline const char *ccurl_effective_url(CURL *curl) { char *url = 0; curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &url); return url; }
#endif
