import CCurl
import Foundation

/// Options of one easy handle for one attempt, in one place.
enum CurlEasy {
    /// Runs `curl_global_init` once per process, before the first handle.
    static let globalInit: Void = { _ = ccurl_global_init() }()

    static func configure(_ easy: UnsafeMutableRawPointer, url: String,
                          headers: UnsafeMutablePointer<curl_slist>?, pinned: UnsafeMutablePointer<curl_slist>?,
                          configuration c: FetcherConfiguration, credentials: Bool,
                          transfer: UnsafeMutableRawPointer, errorBuffer: UnsafeMutablePointer<CChar>) {
        _ = ccurl_easy_setopt_string(easy, CURLOPT_URL, url)
        // Threads: no signals for DNS timeouts (the resolver is threaded anyway).
        _ = ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        // Redirects are followed hop by hop by `TransferState` (credentials, --allow-host and the
        // address policy per hop), never by curl; nothing but http and https is ever fetched.
        _ = ccurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0)
        _ = ccurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = ccurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, ccurl_http_version_2tls)
        _ = ccurl_easy_setopt_string(easy, CURLOPT_USERAGENT, c.userAgent)
        _ = ccurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headers)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(max(1, c.connectTimeout * 1000)))
        _ = ccurl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, max(1, c.lowSpeedLimit))
        _ = ccurl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, Int(max(1, c.lowSpeedTime.rounded(.up))))
        _ = ccurl_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, c.receiveBufferSize)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        _ = ccurl_easy_setopt_write_function(easy, CurlCallbacks.write)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, transfer)
        _ = ccurl_easy_setopt_header_function(easy, CurlCallbacks.header)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, transfer)
        // The address policy: every address before connecting, every request before sending.
        _ = ccurl_easy_setopt_opensocket_function(easy, CurlCallbacks.openSocket)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, transfer)
        _ = ccurl_easy_setopt_prereq_function(easy, CurlCallbacks.prerequest)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_PREREQDATA, transfer)
        if let pinned { _ = ccurl_easy_setopt_slist(easy, CURLOPT_RESOLVE, pinned) }
        if let proxy = c.upstreamProxy { _ = ccurl_easy_setopt_string(easy, CURLOPT_PROXY, proxy) }
        c.access.configure(easy, url: url, credentials: credentials)
        if c.insecure {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0)
            _ = ccurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0)
        }
    }

    /// The origin could not be reached at all: no connection, no address for its name, no
    /// answer in time (offline mode marks it down; see `OriginReachObserving`). Never a fault of
    /// the request itself (`requestFault`).
    static func isUnreachable(_ code: CURLcode) -> Bool {
        switch code {
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_OPERATION_TIMEDOUT:
            return true
        default:
            return false
        }
    }

    /// Why curl refused the request itself, before asking anyone: a malformed URL (a raw space,
    /// no host), a scheme other than http and https. That request fails (`.refusedAddress`, not
    /// retried), and says nothing about its origin; nil for every other result.
    /// (curl also says "unsupported protocol" for an answer that is not HTTP on a kept connection:
    /// only a URL whose scheme is not http or https is the request's fault.)
    static func requestFault(_ code: CURLcode, url: String) -> String? {
        switch code {
        case CURLE_URL_MALFORMAT:
            return "not a valid URL"
        case CURLE_UNSUPPORTED_PROTOCOL:
            let scheme = URLOrigin(url)?.scheme
            return scheme == "http" || scheme == "https" ? nil : "only http and https URLs are fetched"
        default:
            return nil
        }
    }

    /// Curl results worth another attempt: the connection broke, or was refused (an origin
    /// restarting). DNS failures, bad URLs, TLS verification failures are not.
    static func isRetryable(_ code: CURLcode) -> Bool {
        switch code {
        case CURLE_COULDNT_CONNECT, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_GOT_NOTHING,
             CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_SSL_CONNECT_ERROR, CURLE_HTTP3, CURLE_QUIC_CONNECT_ERROR:
            return true
        default:
            return false
        }
    }
}
