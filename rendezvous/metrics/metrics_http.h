// MetricsHttpServer: the plain-HTTP endpoint that ctrund --metrics-port
// serves Prometheus' text, the status page and its JSON on (docs/metrics.md).
//
// One request per connection (Connection: close). GET answers 200 on
//   /metrics   pages.metrics() as "text/plain; version=0.0.4"
//   /          the status page (status_page.h) as "text/html"
//   /api/runs  pages.runs_json() as "application/json"
// (a query string is ignored); another path 404; another method 405; a
// request head that is not one line "METHOD TARGET HTTP/1.x" 400. A
// connection that has not sent its whole head (up to the blank line, at most
// 8 KiB) within 10 s is closed without an answer; a request body is never
// read.
//
// Thread model: Start spawns one thread running one io_context; the pages'
// functions run on it. The destructor stops and joins it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ctrun::rdzv {

// The bodies the endpoint renders per request, each called on the server's
// thread; both must be set.
struct HttpPages {
  std::function<std::string()> metrics;    // GET /metrics: Prometheus text (Metrics::Render)
  std::function<std::string()> runs_json;  // GET /api/runs: RunsJson
};

// The whole HTTP response to `head` (the request line and headers, without
// the blank line). Pure apart from calling the page function it routes to.
std::string MetricsHttpResponse(std::string_view head, const HttpPages& pages);

class MetricsHttpServer {
 public:
  // Listens on host:port (port 0 picks a free one). Errors: Unavailable
  // "cannot listen on HOST:PORT for metrics: <reason>" naming the fix.
  static Result<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host, int port, HttpPages pages);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const;

 private:
  class Impl;
  explicit MetricsHttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ctrun::rdzv
