#include "rendezvous/metrics/status_page.h"

namespace ctrun::rdzv {

namespace {

// Table cells are built with textContent only (see the header). Columns the
// rendezvous has no data for yet (health, step time) show "—".
constexpr std::string_view kPage = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ctrun status</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2330; background: #f6f7f9; }
h1 { font-size: 20px; margin: 0 0 .2em; }
h2 { font-size: 17px; margin: 0 0 .3em; }
h3 { font-size: 14px; margin: 1em 0 .3em; color: #4a5366; }
#updated { color: #6b7385; margin-bottom: 1em; }
#updated.error { color: #b3261e; font-weight: 600; }
section.run { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 1em 1.2em; margin-bottom: 1.2em; }
.summary { color: #4a5366; }
table { border-collapse: collapse; min-width: 40em; }
th, td { text-align: left; padding: .25em .8em .25em 0; border-bottom: 1px solid #eceff3; white-space: nowrap; }
th { font-weight: 600; color: #4a5366; }
td.num { text-align: right; }
.state { padding: 0 .4em; border-radius: 3px; background: #eceff3; }
.state.member, .state.running { background: #d6f0dc; }
.state.participant, .state.forming, .state.rejoining { background: #fff1c7; }
.state.closed, .state.finishing, .state.restarted { background: #e3e7ee; }
.none { color: #8a91a0; }
.why { border-left: 3px solid #b3261e; padding: .2em .8em; margin: .6em 0; background: #fdf3f2; }
.why .root { font-weight: 600; }
.why .detail { font-family: ui-monospace, monospace; white-space: pre-wrap; color: #4a5366; }
</style>
</head>
<body>
<h1>ctrun rendezvous</h1>
<div id="updated">loading…</div>
<div id="runs"></div>
<script>
"use strict";
const POLL_MS = 2000;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function ago(s) { return s === null || s === undefined ? "—" : s.toFixed(1) + " s ago"; }
function dash(v) { return v === null || v === undefined ? "—" : String(v); }
function badge(text) { const s = el("span", "state " + text, text); return s; }

function table(cls, headers, rows) {
  const t = el("table", cls);
  const head = t.createTHead().insertRow();
  for (const h of headers) head.appendChild(el("th", null, h));
  const body = t.createTBody();
  for (const r of rows) body.appendChild(r);
  return t;
}
function row(cls, cells) {
  const tr = el("tr", cls);
  for (const c of cells) {
    const td = el("td", c.cls || null);
    if (c.node) td.appendChild(c.node); else td.textContent = c.text;
    tr.appendChild(td);
  }
  return tr;
}

// The verdict on the failures the nodes reported (ctrun status --why).
function renderWhy(why) {
  const d = el("div", "why");
  d.appendChild(el("h3", null, "Why the job failed"));
  if (why.verdict) d.appendChild(el("div", "verdict", why.verdict.line));
  const r = why.root;
  if (r && r.rank < 0) {
    d.appendChild(el("div", "root", "root cause: node " + (r.addr || r.host) +
        (r.node_lost ? " was lost" : " left the job as unhealthy") + (r.error_message ? ": " + r.error_message : "")));
  } else if (r) {
    const end = r.signal ? "was killed by signal " + r.signal : "exited with " + r.exit_code;
    const when = new Date(r.failed_at_unix_s * 1000).toISOString().replace("T", " ").replace("Z", " UTC");
    let node = r.addr || r.host;
    if (r.host && r.host !== node) node += " (" + r.host + ")";
    d.appendChild(el("div", "root", "root cause: rank " + r.rank + " (node " + node +
        ", local rank " + r.local_rank + ") " + end + " at " + when +
        (r.error_message ? ": " + r.error_message : "")));
    if (r.last_line) d.appendChild(el("div", "detail", "last line: " + r.last_line));
    if (r.error_file) d.appendChild(el("div", "detail", "error file: " + r.error_file));
    if (r.stacks_file) d.appendChild(el("div", "detail", "stacks: " + r.stacks_file));
  } else {
    d.appendChild(el("div", "root", "no root cause: every worker reported was stopped by its agent"));
  }
  for (const c of why.consequences) {
    const after = Math.abs(c.max_after_s - c.min_after_s) < 0.05 ? c.min_after_s.toFixed(1) + " s"
        : c.min_after_s.toFixed(1) + "-" + c.max_after_s.toFixed(1) + " s";
    const reason = !r ? c.reason : c.reason === "failed after it" ? "failed " + after + " after it"
        : c.reason + " after " + after;
    const line = el("div", "consequence", (c.workers === 1 ? "rank " : "ranks ") + c.ranks + " on " + c.nodes +
        (c.nodes === 1 ? " node: " : " nodes: ") + reason);
    line.dataset.reason = c.reason;
    d.appendChild(line);
  }
  return d;
}

function renderRun(run) {
  const s = el("section", "run");
  s.dataset.runId = run.run_id;
  s.appendChild(el("h2", null, "run " + run.run_id));
  let summary = "round " + run.round + ", world size " + run.world_size +
      "; nodes " + run.min_nodes + ".." + run.max_nodes + ", " + run.live_nodes + " live" +
      "; " + run.restarts_total + (run.restarts_total === 1 ? " restart" : " restarts");
  if (run.last_call_in_s !== null) summary += "; last call in " + run.last_call_in_s.toFixed(1) + " s";
  const p = el("div", "summary");
  p.appendChild(badge(run.state));
  p.appendChild(document.createTextNode(" " + summary));
  s.appendChild(p);
  if (run.why) s.appendChild(renderWhy(run.why));

  s.appendChild(el("h3", null, "Nodes"));
  s.appendChild(table("nodes",
      ["Rank", "State", "Node", "Workers", "Address", "Last keep-alive", "Health", "Step time"],
      run.nodes.map(n => {
        const tr = row("node", [
          {text: dash(n.group_rank), cls: "num"}, {node: badge(n.state)}, {text: n.node},
          {text: n.workers > 0 ? n.workers : "—", cls: "num"}, {text: n.addr || "—"},
          {text: ago(n.last_keep_alive_s)}, {text: dash(n.health), cls: "none"},
          {text: n.step_time_s === null ? "—" : n.step_time_s.toFixed(3) + " s", cls: "none"}]);
        tr.dataset.node = n.node;
        tr.dataset.state = n.state;
        return tr;
      })));

  s.appendChild(el("h3", null, "Rounds (" + run.rounds_total + " in all; newest first)"));
  s.appendChild(table("rounds", ["Round", "World size", "Nodes", "Formed", "Ended", "End"],
      run.rounds.slice().reverse().map(r => {
        const tr = row("round", [
          {text: r.round, cls: "num"}, {text: r.world_size, cls: "num"}, {text: r.nodes.join(" ")},
          {text: ago(r.started_s_ago)}, {text: ago(r.ended_s_ago)}, {node: badge(r.end)}]);
        tr.dataset.round = r.round;
        return tr;
      })));

  s.appendChild(el("h3", null, "Restarts (" + run.restarts_total + " in all; newest first)"));
  s.appendChild(table("restarts", ["Round", "Cause", "Caused by", "Nodes restarted", "When"],
      run.restarts.slice().reverse().map(r => {
        const tr = row("restart", [
          {text: r.round, cls: "num"}, {text: r.cause}, {text: r.node}, {text: r.nodes.join(" ")},
          {text: ago(r.s_ago)}]);
        tr.dataset.cause = r.cause;
        return tr;
      })));
  return s;
}

async function poll() {
  const updated = document.getElementById("updated");
  try {
    const reply = await fetch("api/runs", {cache: "no-store"});
    if (!reply.ok) throw new Error("HTTP " + reply.status);
    const doc = await reply.json();
    const runs = document.getElementById("runs");
    runs.replaceChildren(...doc.runs.map(renderRun));
    if (doc.runs.length === 0) runs.appendChild(el("p", "none", "No runs yet: nodes have not joined."));
    updated.className = "";
    updated.textContent = "updated " + new Date().toLocaleTimeString() + "; refreshes every " +
        POLL_MS / 1000 + " s";
  } catch (e) {
    updated.className = "error";
    updated.textContent = "cannot reach the rendezvous (" + e.message + "); retrying";
  }
  setTimeout(poll, POLL_MS);
}
poll();
</script>
</body>
</html>
)html";

}  // namespace

std::string_view StatusPageHtml() { return kPage; }

}  // namespace ctrun::rdzv
