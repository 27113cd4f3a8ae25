// Metrics (Prometheus text from a real machine's decisions), the metrics
// endpoint's HTTP answers and status page, and RunView (what `ctrun status` shows).
#include "rendezvous/metrics/metrics.h"

#include <catch2/catch.hpp>

#include "rendezvous/metrics/metrics_http.h"
#include "rendezvous/metrics/status_page.h"
#include "rendezvous/machine/run_view.h"
#include "tests/rendezvous/machine/script.h"

namespace ctrun::rdzv::testing {
namespace {

bool Has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

// Feeds `metrics` a Join of `name` in run "job" and the decisions it caused.
void Join(Script& s, Metrics& metrics, const std::string& name) {
  metrics.OnJoin("job", N(name), s.At(s.Elapsed()));
  s.Join(name);
  metrics.OnDecisions("job", s.last(), s.At(s.Elapsed()));
}

std::string Render(const Metrics& metrics, Script& s) {
  return metrics.Render({Metrics::RunNow{"job", s.machine().Tally(), 2, {}}});
}

TEST_CASE("Metrics show each rank's step time and count stragglers") {
  Script s(Nodes(2, 2));
  Metrics metrics;
  StragglerDetector d;
  const StragglerParams p{1.5, 1};
  d.Report(N("a"), StepReport{1, p, {RankStep{0, 0, std::chrono::milliseconds(100), 1}}});
  d.Report(N("b"), StepReport{1, p, {RankStep{1, 0, std::chrono::milliseconds(100), 1}}});
  std::vector<StragglerChange> flagged =
      d.Report(N("c"), StepReport{1, p, {RankStep{2, 0, std::chrono::milliseconds(250), 1}}});
  REQUIRE(flagged.size() == 1);
  metrics.OnStragglerChanges("job", flagged);
  std::string text = metrics.Render({Metrics::RunNow{"job", s.machine().Tally(), 0, d.Ranks()}});
  CHECK(Has(text, "ctrun_rank_step_seconds{run_id=\"job\",node=\"a\",rank=\"0\"} 0.1"));
  CHECK(Has(text, "ctrun_rank_step_seconds{run_id=\"job\",node=\"c\",rank=\"2\"} 0.25"));
  CHECK(Has(text, "ctrun_stragglers{run_id=\"job\"} 1"));
  CHECK(Has(text, "ctrun_stragglers_total{run_id=\"job\"} 1"));
}

TEST_CASE("Metrics count rounds, restarts by cause and each node's join latency") {
  Script s(Nodes(2, 2));
  Metrics metrics;
  Join(s, metrics, "a");
  s.Jump(seconds(2));
  Join(s, metrics, "b");  // the round completes: a waited 2 s, b 0 s
  std::string text = Render(metrics, s);
  CHECK(Has(text, "ctrun_runs 1"));
  CHECK(Has(text, "ctrun_rounds_total{run_id=\"job\"} 1"));
  CHECK(Has(text, "ctrun_join_latency_seconds_bucket{run_id=\"job\",le=\"0.01\"} 1"));
  CHECK(Has(text, "ctrun_join_latency_seconds_bucket{run_id=\"job\",le=\"1\"} 1"));
  CHECK(Has(text, "ctrun_join_latency_seconds_bucket{run_id=\"job\",le=\"2.5\"} 2"));
  CHECK(Has(text, "ctrun_join_latency_seconds_bucket{run_id=\"job\",le=\"+Inf\"} 2"));
  CHECK(Has(text, "ctrun_join_latency_seconds_sum{run_id=\"job\"} 2"));
  CHECK(Has(text, "ctrun_join_latency_seconds_count{run_id=\"job\"} 2"));
  CHECK(Has(text, "ctrun_nodes{run_id=\"job\",state=\"member\"} 2"));
  CHECK(Has(text, "ctrun_world_size{run_id=\"job\"} 2"));
  CHECK(Has(text, "ctrun_closed{run_id=\"job\"} 0"));
  CHECK(text.find("# TYPE ctrun_join_latency_seconds histogram\n") != std::string::npos);

  // b's workers fail: it leaves (and stays expected back, as a does); both join again: a new round.
  s.Leave("b", LeaveReason::kFailure);
  metrics.OnDecisions("job", s.last(), s.At(s.Elapsed()));
  text = Render(metrics, s);
  CHECK(Has(text, "ctrun_restarts_total{run_id=\"job\",cause=\"workers_failed\"} 1"));
  CHECK(Has(text, "ctrun_restarts_total{run_id=\"job\",cause=\"node_left\"} 0"));
  CHECK(Has(text, "ctrun_restarts_total{run_id=\"job\",cause=\"node_lost\"} 0"));
  CHECK(Has(text, "ctrun_nodes{run_id=\"job\",state=\"rejoining\"} 2"));
  Join(s, metrics, "b");
  s.Jump(seconds(1));
  Join(s, metrics, "a");
  text = Render(metrics, s);
  CHECK(Has(text, "ctrun_rounds_total{run_id=\"job\"} 2"));
  CHECK(Has(text, "ctrun_round{run_id=\"job\"} 1"));
  CHECK(Has(text, "ctrun_join_latency_seconds_count{run_id=\"job\"} 4"));
  CHECK(Has(text, "ctrun_join_latency_seconds_sum{run_id=\"job\"} 3"));

  // a falls silent: evicted, and b's round breaks as node_lost.
  s.Kill("a");
  s.Run(seconds(20));
  // Script stepped the deadlines itself; feed what it decided.
  metrics.OnDecisions("job", {Evicted{N("a"), "gone"}, RestartRequested{1, RestartReason::kNodeLost, N("a"), {N("b")}}},
                      s.At(s.Elapsed()));
  text = Render(metrics, s);
  CHECK(Has(text, "ctrun_evictions_total{run_id=\"job\"} 1"));
  CHECK(Has(text, "ctrun_restarts_total{run_id=\"job\",cause=\"node_lost\"} 1"));
}

TEST_CASE("Metrics: a repeated Join keeps the first time, a timed-out node is not counted") {
  Metrics metrics;
  const TimePoint t0{};
  metrics.OnJoin("r", N("a"), t0);
  metrics.OnJoin("r", N("a"), t0 + seconds(5));  // idempotent re-Join
  metrics.OnJoin("r", N("b"), t0);
  metrics.OnDecisions("r", {TimedOut{N("b"), "join timeout"}}, t0 + seconds(6));
  metrics.OnDecisions("r", {RoundComplete{0, {Member{N("a"), 0, 1, "", 0}, Member{N("b"), 1, 1, "", 0}}, 2, false, ""}},
                      t0 + seconds(7));
  const std::string text = metrics.Render({});
  CHECK(Has(text, "ctrun_runs 0"));
  CHECK(Has(text, "ctrun_join_timeouts_total{run_id=\"r\"} 1"));
  CHECK(Has(text, "ctrun_join_latency_seconds_count{run_id=\"r\"} 1"));
  CHECK(Has(text, "ctrun_join_latency_seconds_sum{run_id=\"r\"} 7"));
  CHECK(text.find("ctrun_round{") == std::string::npos);  // no gauges for a run not served now
}

TEST_CASE("Metrics: ctrun_unhealthy_nodes_total is the run's count of unhealthy leaves") {
  Params p = Nodes(1, 2);
  p.max_unhealthy_nodes = 3;
  Script s(p);
  Metrics metrics;
  s.Join("a");
  s.Join("b");
  CHECK(Has(Render(metrics, s), "ctrun_unhealthy_nodes_total{run_id=\"job\"} 0"));
  s.LeaveUnhealthy("b", "disk full");
  metrics.OnDecisions("job", s.last(), s.At(s.Elapsed()));
  const std::string text = Render(metrics, s);
  CHECK(Has(text, "# TYPE ctrun_unhealthy_nodes_total counter"));
  CHECK(Has(text, "ctrun_unhealthy_nodes_total{run_id=\"job\"} 1"));
}

TEST_CASE("Label values are escaped") {
  CHECK(EscapeLabelValue("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  Metrics metrics;
  metrics.OnDecisions("x\"y", {Closed{0, {}}}, TimePoint{});
  CHECK(Has(metrics.Render({}), "ctrun_rounds_total{run_id=\"x\\\"y\"} 0"));
}

// The endpoint's pages, each body naming itself.
HttpPages Pages() {
  return HttpPages{[] { return std::string("ctrun_runs 0\n"); }, [] { return std::string("{\"runs\":[]}\n"); }};
}

bool StartsWith(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }
bool HasHeader(const std::string& s, std::string_view header) {
  return s.find(std::string(header) + "\r\n") < s.find("\r\n\r\n");
}
std::string Body(const std::string& s) { return s.substr(s.find("\r\n\r\n") + 4); }

TEST_CASE("The metrics endpoint answers GET /metrics and refuses the rest") {
  const HttpPages pages = Pages();
  const std::string ok = MetricsHttpResponse("GET /metrics HTTP/1.1\r\nHost: x", pages);
  CHECK(StartsWith(ok, "HTTP/1.1 200 OK\r\n"));
  CHECK(HasHeader(ok, "Content-Type: text/plain; version=0.0.4; charset=utf-8"));
  CHECK(HasHeader(ok, "Content-Length: 13"));
  CHECK(HasHeader(ok, "Connection: close"));
  CHECK(Body(ok) == "ctrun_runs 0\n");
  CHECK(StartsWith(MetricsHttpResponse("GET /metrics?x=1 HTTP/1.0", pages), "HTTP/1.1 200"));
  const std::string post = MetricsHttpResponse("POST /metrics HTTP/1.1", pages);
  CHECK(StartsWith(post, "HTTP/1.1 405 Method Not Allowed\r\n"));
  CHECK(HasHeader(post, "Allow: GET"));
  for (const char* bad : {"", "GET", "GET /metrics", "GET /metrics SPDY/3", "GET  /metrics HTTP/1.1", "\x01\x02"}) {
    CAPTURE(bad);
    CHECK(StartsWith(MetricsHttpResponse(bad, pages), "HTTP/1.1 400"));
  }
}

TEST_CASE("The endpoint serves the status page at / and the runs' JSON at /api/runs") {
  const HttpPages pages = Pages();
  const std::string page = MetricsHttpResponse("GET / HTTP/1.1\r\nHost: x\r\nAccept: text/html", pages);
  CHECK(StartsWith(page, "HTTP/1.1 200 OK\r\n"));
  CHECK(HasHeader(page, "Content-Type: text/html; charset=utf-8"));
  CHECK(HasHeader(page, "Content-Length: " + std::to_string(StatusPageHtml().size())));
  CHECK(page.find("Content-Security-Policy: default-src 'none';") < page.find("\r\n\r\n"));
  CHECK(Body(page) == StatusPageHtml());
  CHECK(StartsWith(MetricsHttpResponse("GET /?refresh=1 HTTP/1.1", pages), "HTTP/1.1 200"));
  const std::string json = MetricsHttpResponse("GET /api/runs HTTP/1.1", pages);
  CHECK(StartsWith(json, "HTTP/1.1 200 OK\r\n"));
  CHECK(HasHeader(json, "Content-Type: application/json; charset=utf-8"));
  CHECK(HasHeader(json, "Cache-Control: no-store"));
  CHECK(Body(json) == "{\"runs\":[]}\n");
  for (const char* path : {"/index.html", "/api/runs/", "/api", "/metrics/", "//", "/../metrics", "*"}) {
    CAPTURE(path);
    const std::string r = MetricsHttpResponse(std::string("GET ") + path + " HTTP/1.1", pages);
    CHECK(StartsWith(r, "HTTP/1.1 404 Not Found\r\n"));
    CHECK(Body(r) == "not found: the status page is at /, its JSON at /api/runs, the metrics at /metrics\n");
  }
  for (const char* method : {"POST", "PUT", "DELETE", "HEAD", "get"}) {
    CAPTURE(method);
    for (const char* path : {"/", "/api/runs", "/nowhere"}) {
      const std::string r = MetricsHttpResponse(std::string(method) + " " + path + " HTTP/1.1", pages);
      CHECK(StartsWith(r, "HTTP/1.1 405 Method Not Allowed\r\n"));
      CHECK(HasHeader(r, "Allow: GET"));
    }
  }
}

TEST_CASE("The status page is self-contained: no external asset, strings set as text") {
  const std::string_view page = StatusPageHtml();
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(page.find("fetch(\"api/runs\"") != std::string_view::npos);
  for (const char* external : {"http://", "https://", "src=", "href=", "@import", "url(", "innerHTML", "outerHTML",
                               "insertAdjacentHTML", "document.write", "eval("}) {
    CAPTURE(external);
    CHECK(page.find(external) == std::string_view::npos);
  }
}

TEST_CASE("RunView lists members by group rank, then the others, with their last keep-alive") {
  Script s(Nodes(2, 3));
  s.Join("b", std::nullopt, 2);
  s.Join("a", std::nullopt, 1);
  s.Run(seconds(30));  // the last call completes the round; keep-alives every 5 s
  s.Jump(seconds(2));
  s.Join("c", std::nullopt, 4);  // a newcomer breaks the round: a and b rejoin
  RunView v = ViewOf(s.machine().Export(), s.machine().Tally(), s.At(s.Elapsed()));
  REQUIRE(v.nodes.size() == 3);
  CHECK(v.world_size == 0);
  CHECK(v.nodes[0].node == N("a"));
  CHECK(v.nodes[0].state == "rejoining");
  CHECK(v.nodes[0].group_rank == 0);
  CHECK(v.nodes[0].last_seen_s == Approx(2));
  CHECK(v.nodes[2].node == N("c"));
  CHECK(v.nodes[2].state == "participant");
  CHECK(v.nodes[2].local_world_size == 4);
  CHECK(v.nodes[2].last_seen_s == 0);
  s.Join("a");
  s.Join("b", std::nullopt, 2);
  v = ViewOf(s.machine().Export(), s.machine().Tally(), s.At(s.Elapsed()));
  CHECK(v.world_size == 7);
  REQUIRE(v.nodes.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(v.nodes[i].state == "member");
    CHECK(v.nodes[i].group_rank == i);
  }
  s.Close();
  v = ViewOf(s.machine().Export(), s.machine().Tally(), s.At(s.Elapsed()));
  REQUIRE(v.nodes.size() == 3);
  CHECK(v.nodes[0].state == "finishing");
  CHECK(v.nodes[0].addr == "a.ip");
}

}  // namespace
}  // namespace ctrun::rdzv::testing
