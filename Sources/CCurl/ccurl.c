// Typed shims over libcurl's variadic API: see include/ccurl.h for why.
#include "ccurl.h"

CURLcode ccurl_global_init(void) { return curl_global_init(CURL_GLOBAL_ALL); }

CURLcode ccurl_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode ccurl_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode ccurl_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode ccurl_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode ccurl_easy_setopt_write_function(CURL *easy, ccurl_data_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, callback);
}
CURLcode ccurl_easy_setopt_header_function(CURL *easy, ccurl_data_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, callback);
}
CURLcode ccurl_easy_setopt_opensocket_function(CURL *easy, ccurl_opensocket_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, callback);
}
CURLcode ccurl_easy_setopt_prereq_function(CURL *easy, ccurl_prereq_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, callback);
}

CURLcode ccurl_easy_getinfo_string(CURL *easy, CURLINFO info, const char **value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLcode ccurl_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLcode ccurl_easy_getinfo_off_t(CURL *easy, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

int ccurl_msg_is_done(const CURLMsg *msg) { return msg->msg == CURLMSG_DONE; }
CURL *ccurl_msg_easy(const CURLMsg *msg) { return msg->easy_handle; }
CURLcode ccurl_msg_result(const CURLMsg *msg) { return msg->data.result; }

const struct sockaddr *ccurl_sockaddr_address(const struct curl_sockaddr *address) { return &address->addr; }

const long ccurl_pipe_multiplex = CURLPIPE_MULTIPLEX;
const long ccurl_http_version_2tls = CURL_HTTP_VERSION_2TLS;
const size_t ccurl_error_size = CURL_ERROR_SIZE;
const curl_socket_t ccurl_socket_bad = CURL_SOCKET_BAD;
const int ccurl_prereqfunc_ok = CURL_PREREQFUNC_OK;
const int ccurl_prereqfunc_abort = CURL_PREREQFUNC_ABORT;
const size_t ccurl_writefunc_pause = CURL_WRITEFUNC_PAUSE;
const int ccurl_pause_cont = CURLPAUSE_CONT;
const int ccurl_pause_recv = CURLPAUSE_RECV;
