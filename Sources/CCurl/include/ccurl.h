// ccurl: typed, non-variadic shims over libcurl for the Fetcher module.
//
// Why: curl_easy_setopt / curl_easy_getinfo / curl_multi_setopt are C variadic functions, which
// Swift cannot call. Each shim fixes one argument type, so the Swift side stays type-checked and
// never passes a value of the wrong width through a `...` (a classic source of crashes with
// curl_off_t vs long). Only Fetcher imports this module.
#ifndef CCURL_H
#define CCURL_H

#include <curl/curl.h>

/// CURLOPT_WRITEFUNCTION / CURLOPT_HEADERFUNCTION signature.
typedef size_t (*ccurl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
/// CURLOPT_XFERINFOFUNCTION signature.
/// CURLOPT_OPENSOCKETFUNCTION signature: called with each resolved address before connecting.
typedef curl_socket_t (*ccurl_opensocket_callback)(void *clientp, curlsocktype purpose,
                                                   struct curl_sockaddr *address);
/// CURLOPT_PREREQFUNCTION signature: called before each request is sent, also on a reused
/// connection and after each redirect.
typedef int (*ccurl_prereq_callback)(void *clientp, char *conn_primary_ip, char *conn_local_ip,
                                     int conn_primary_port, int conn_local_port);

/// curl_global_init(CURL_GLOBAL_ALL): the macro is not importable into Swift.
CURLcode ccurl_global_init(void);

CURLcode ccurl_easy_setopt_long(CURL *easy, CURLoption option, long value);
CURLcode ccurl_easy_setopt_string(CURL *easy, CURLoption option, const char *value);
CURLcode ccurl_easy_setopt_pointer(CURL *easy, CURLoption option, void *value);
CURLcode ccurl_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *value);
CURLcode ccurl_easy_setopt_write_function(CURL *easy, ccurl_data_callback callback);
CURLcode ccurl_easy_setopt_header_function(CURL *easy, ccurl_data_callback callback);
CURLcode ccurl_easy_setopt_opensocket_function(CURL *easy, ccurl_opensocket_callback callback);
CURLcode ccurl_easy_setopt_prereq_function(CURL *easy, ccurl_prereq_callback callback);

CURLcode ccurl_easy_getinfo_string(CURL *easy, CURLINFO info, const char **value);
CURLcode ccurl_easy_getinfo_long(CURL *easy, CURLINFO info, long *value);
CURLcode ccurl_easy_getinfo_off_t(CURL *easy, CURLINFO info, curl_off_t *value);

CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

/// CURLMsg fields: `data` is a union, read it here rather than through Swift's union import.
int ccurl_msg_is_done(const CURLMsg *msg);
CURL *ccurl_msg_easy(const CURLMsg *msg);
CURLcode ccurl_msg_result(const CURLMsg *msg);

/// The address inside a curl_sockaddr. `addr` is declared as a `struct sockaddr` but holds a
/// whole sockaddr_in6 for IPv6 (it is the struct's last member): Swift must not copy it by value.
const struct sockaddr *ccurl_sockaddr_address(const struct curl_sockaddr *address);

/// Constants that are macros in curl.h (not all macros import into Swift).
extern const long ccurl_pipe_multiplex;       // CURLPIPE_MULTIPLEX
extern const long ccurl_http_version_2tls;    // CURL_HTTP_VERSION_2TLS
extern const size_t ccurl_error_size;         // CURL_ERROR_SIZE
extern const curl_socket_t ccurl_socket_bad;  // CURL_SOCKET_BAD
extern const int ccurl_prereqfunc_ok;         // CURL_PREREQFUNC_OK
extern const int ccurl_prereqfunc_abort;      // CURL_PREREQFUNC_ABORT
extern const size_t ccurl_writefunc_pause;    // CURL_WRITEFUNC_PAUSE
extern const int ccurl_pause_cont;            // CURLPAUSE_CONT
extern const int ccurl_pause_recv;            // CURLPAUSE_RECV

#endif
