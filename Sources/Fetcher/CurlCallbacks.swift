import CCurl
import Foundation

/// The C entry points libcurl calls, as non-capturing `@convention(c)` closures defined in a
/// library file (never in top-level code: they run on the multi loop's thread). Each recovers
/// its `CurlTransfer` from the user-data pointer set in `CurlEasy.configure`.
///
/// Returning a count different from `size * nmemb` makes curl abort the attempt with
/// CURLE_WRITE_ERROR; `TransferState.abort` then says why. CURL_WRITEFUNC_PAUSE pauses the
/// transfer with the bytes kept by curl, until the loop calls `curl_easy_pause(CURLPAUSE_CONT)`.
enum CurlCallbacks {
    static let header: ccurl_data_callback = { ptr, size, nmemb, userdata in
        let count = size * nmemb
        guard let ptr, let userdata else { return 0 }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
        return transfer.didReceiveHeaderLine(UnsafeRawBufferPointer(start: ptr, count: count)) ? count : 0
    }

    static let write: ccurl_data_callback = { ptr, size, nmemb, userdata in
        let count = size * nmemb
        guard let userdata else { return 0 }
        if count == 0 { return 0 }
        guard let ptr else { return 0 }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
        switch transfer.didReceiveBody(UnsafeRawBufferPointer(start: ptr, count: count)) {
        case .taken: return count
        case .pause: return ccurl_writefunc_pause
        case .abort: return 0
        }
    }

    /// Every resolved address passes here before curl connects to it (also after a redirect):
    /// no socket means no connection, and curl tries the next address or fails the attempt.
    static let openSocket: ccurl_opensocket_callback = { clientp, purpose, address in
        guard let clientp, let address else { return ccurl_socket_bad }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(clientp).takeUnretainedValue()
        return transfer.openSocket(address)
    }

    /// Before each request is sent, on a new or reused connection.
    static let prerequest: ccurl_prereq_callback = { clientp, primaryIP, _, _, _ in
        guard let clientp else { return ccurl_prereqfunc_abort }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(clientp).takeUnretainedValue()
        return transfer.allowsRequest(primaryIP: primaryIP.map { String(cString: $0) }) ? ccurl_prereqfunc_ok : ccurl_prereqfunc_abort
    }
}
