import CacheCore
import Foundation

/// The query of `status.json`, read into the view it asks for (`StatusView`): pure, so each
/// form and each mistake is a row of a table test.
///
/// - no query, or none of the names below: the full document (every file);
/// - `view=summary[&filter=S]`: totals, transfers, errors, origins and folder totals, no file;
/// - `view=unsaved`: the files whose figures the index does not hold yet (`cache ls` beside a daemon);
/// - `folder=ID[&page=N][&per=N][&filter=S][&order=name|size|cached|access]`: one page of a folder;
/// - `url=URL[&per=N][&order=...]`: the page of its folder that holds that file (a deep link).
enum StatusDocumentQuery {
    /// The view `target` (a request target, query included) asks for, or a one-line reason why
    /// it names none.
    static func view(target: String) -> Result<StatusView, QueryError> {
        guard let q = target.firstIndex(of: "?") else { return .success(.full) }
        var values: [String: String] = [:]
        for item in URLComponents(string: "http://x/?" + target[target.index(after: q)...].replacingOccurrences(of: "+", with: "%20"))?.queryItems ?? [] {
            values[item.name] = item.value ?? ""
        }
        let filter = values["filter"] ?? ""
        guard filter.utf8.count <= 500 else { return .failure(QueryError("filter= is longer than 500 bytes: shorten it")) }
        var order = FileOrder.name
        if let o = values["order"] {
            guard let known = FileOrder(rawValue: o) else {
                return .failure(QueryError("order=\(o.prefix(40)) is not one of \(FileOrder.allCases.map(\.rawValue).joined(separator: ", "))"))
            }
            order = known
        }
        var pageSize = StatusView.defaultPageSize
        if let p = values["per"] {
            guard let n = Int(p), (1...StatusView.maxPageSize).contains(n) else {
                return .failure(QueryError("per=\(p.prefix(40)) is not a number of files from 1 to \(StatusView.maxPageSize)"))
            }
            pageSize = n
        }
        if let id = values["folder"] {
            var page = 0
            if let p = values["page"] {
                guard let n = Int(p), n >= 0, n < Int(Int32.max) else { return .failure(QueryError("page=\(p.prefix(40)) is not a page number (0 or more)")) }
                page = n
            }
            return .success(.folder(id: id, page: page, pageSize: pageSize, filter: filter, order: order))
        }
        if let url = values["url"] { return .success(.locate(url: url, pageSize: pageSize, order: order)) }
        if let v = values["view"] {
            switch v {
            case "summary": return .success(.summary(filter: filter))
            case "full": return .success(.full)
            case "unsaved": return .success(.unsaved)
            default: return .failure(QueryError("view=\(v.prefix(40)) is not 'summary', 'full' or 'unsaved'"))
            }
        }
        return .success(.full)
    }

    struct QueryError: Error, Equatable, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
