// MetricsHttpServer: the plain-HTTP endpoint that ctrund --metrics-port
// serves Prometheus' text on (docs/metrics.md).
//
// One request per connection (Connection: close). GET /metrics answers 200
// with render()'s text as "text/plain; version=0.0.4"; another path 404;
// another method 405; a request head that is not one line "METHOD TARGET
// HTTP/1.x" 400. A connection that has not sent its whole head (up to the
// blank line, at most 8 KiB) within 10 s is closed without an answer.
//
// Thread model: Start spawns one thread running one io_context; render runs
// on it. The destructor stops and joins it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ctrun::rdzv {

// The whole HTTP response to `head` (the request line and headers, without
// the blank line). Pure apart from calling `render` for GET /metrics.
std::string MetricsHttpResponse(std::string_view head, const std::function<std::string()>& render);

class MetricsHttpServer {
 public:
  // Listens on host:port (port 0 picks a free one). Errors: Unavailable
  // "cannot listen on HOST:PORT for metrics: <reason>" naming the fix.
  static Result<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host, int port,
                                                          std::function<std::string()> render);
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
