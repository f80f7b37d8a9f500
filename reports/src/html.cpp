// The HTML report (writers.h: to_html): one file that opens anywhere, offline, from a CI
// artifact. Everything is inline — style, script, data. Note [A report without JavaScript]: CI
// artifact viewers often serve files under a Content-Security-Policy that blocks inline scripts,
// so the summary, the op x check matrix and the failures are static markup, escaped here; the
// script only adds filters over them. The JSON report itself is in a <script
// type="application/json"> element (data, never run), for the filters and for tools.
#include <algorithm>
#include <string>

#include "opconform/reports/detail/summary.h"
#include "opconform/reports/detail/text.h"
#include "opconform/reports/findings.h"
#include "opconform/reports/writers.h"

namespace opconform::reports {
namespace {

constexpr const char* kStyle = R"css(
:root {
  --passed: #2da44e; --failed: #cf222e; --skipped: #d0d7de; --unsupported: #80b3e6;
  --crashed: #8250df; --timed_out: #e16f24; --mistrusted: #d4a72c;
  --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --panel: #f6f8fa;
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }  /* .controls sets display: flex */
body { margin: 0; padding: 16px 24px 48px; color: var(--ink); background: #fff;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "Noto Sans", "DejaVu Sans", sans-serif; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 24px 0 8px; }
code, pre { font-family: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, monospace; font-size: 12.5px; }
.info { color: var(--muted); margin: 0 0 12px; }
.info span { display: inline-block; max-width: 100%; margin-right: 14px; overflow-wrap: anywhere; }
.info code { color: var(--ink); }
.totals { display: flex; flex-wrap: wrap; gap: 8px; margin: 8px 0 16px; }
.total { border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px; min-width: 92px; background: var(--panel); }
.total b { display: block; font-size: 20px; }
.total.o-all { background: #fff; }
.total[class*=" o-"] { border-left: 6px solid var(--c); }
.controls { display: flex; flex-wrap: wrap; align-items: center; gap: 10px 18px; padding: 10px 12px;
            background: var(--panel); border: 1px solid var(--line); border-radius: 6px; }
.controls fieldset { border: 0; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: 4px 12px; }
.controls legend { float: left; margin-right: 8px; font-weight: 600; }
.controls label { white-space: nowrap; }
.controls input[type=search] { width: 220px; }
#shown { color: var(--muted); margin-left: auto; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 0 0 8px; color: var(--muted); }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 5px;
          vertical-align: -1px; background: var(--c); }
.o-passed { --c: var(--passed); } .o-failed { --c: var(--failed); } .o-skipped { --c: var(--skipped); }
.o-unsupported { --c: var(--unsupported); } .o-crashed { --c: var(--crashed); }
.o-timed_out { --c: var(--timed_out); } .o-mistrusted { --c: var(--mistrusted); }
.matrix-wrap { display: inline-block; max-width: 100%; overflow: auto; max-height: 75vh; border: 1px solid var(--line); border-radius: 6px; }
#matrix { border-collapse: separate; border-spacing: 0; }
#matrix th, #matrix td { border-bottom: 1px solid var(--line); border-right: 1px solid var(--line); padding: 0; }
#matrix thead th { position: sticky; top: 0; background: #fff; z-index: 2; vertical-align: bottom;
                   font-weight: 600; padding: 6px 2px; }
#matrix thead th span { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap; }
#matrix th.op { position: sticky; left: 0; background: #fff; z-index: 1; text-align: left; padding: 3px 10px;
                font-weight: normal; white-space: nowrap; }
#matrix thead th.op { z-index: 3; vertical-align: bottom; }
#matrix td { min-width: 46px; height: 24px; text-align: center; font-size: 11px; font-weight: 600; }
#matrix td.cell { background: var(--c); color: #fff; cursor: default; }
#matrix td.cell.none { background: none; }
#matrix td.cell.o-skipped, #matrix td.cell.o-unsupported, #matrix td.cell.o-mistrusted { color: var(--ink); }
#matrix td.cell a { display: block; color: inherit; text-decoration: none; line-height: 24px; }
#matrix td.cell.o-skipped a, #matrix td.cell.o-unsupported a, #matrix td.cell.o-mistrusted a { color: var(--ink); }
.verdict { font-weight: 600; margin: 4px 0 8px; }
.verdict.fail { color: var(--failed); } .verdict.pass { color: var(--passed); }
table.untested { border-collapse: collapse; } table.untested td { border: 1px solid var(--line); padding: 3px 8px; vertical-align: top; }
#matrix td.empty { background: repeating-linear-gradient(45deg, #fff, #fff 4px, #f3f4f6 4px, #f3f4f6 8px); }
.none { color: var(--muted); padding: 12px; }
.failure { border: 1px solid var(--line); border-left: 6px solid var(--c); border-radius: 6px;
           padding: 8px 12px; margin: 0 0 10px; }
.failure:target { box-shadow: 0 0 0 3px #54aeff66; }
.failure h3 { font-size: 14px; margin: 0 0 6px; font-weight: 600; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; margin-right: 6px; font-size: 12px;
         background: var(--c); color: #fff; }
.badge.o-skipped, .badge.o-unsupported, .badge.o-mistrusted { color: var(--ink); }
.failure pre { margin: 4px 0; padding: 6px 8px; background: var(--panel); border-radius: 4px;
               white-space: pre-wrap; overflow-wrap: anywhere; }
.failure .label { color: var(--muted); font-size: 12px; margin-top: 6px; }
.failure h3 .count { color: var(--muted); font-weight: normal; }
.failure ul.cases { list-style: none; margin: 6px 0 0; padding: 0; }
.failure ul.cases li { border-top: 1px solid var(--line); padding: 4px 0; }
.failure ul.cases li:target { background: #54aeff22; }
.failure .where { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: 12.5px; font-weight: 600; }
.failure .repro code { display: block; padding: 6px 8px; background: #1f2328; color: #f6f8fa; border-radius: 4px;
                       white-space: pre-wrap; overflow-wrap: anywhere; }
)css";

// Adds the filters to the page drawn in markup: it shows the controls (hidden without a script,
// where they would do nothing), and on each change hides the rows, cells and cases that do not
// match and recolours each cell by the worst result still shown. It reads the results from
// #report-data and writes only classes, `hidden` and textContent: never markup.
constexpr const char* kScript = R"js(
(function () {
  'use strict';
  const SEVERITY = { skipped: 0, passed: 1, unsupported: 2, mistrusted: 3, timed_out: 4, crashed: 5, failed: 6 };
  const SHORT = { passed: 'ok', failed: 'FAIL', skipped: 'skip', unsupported: 'n/a', crashed: 'CRASH',
                  timed_out: 'TIME', mistrusted: '?' };
  const isOk = (o) => o === 'passed' || o === 'skipped';
  const results = JSON.parse(document.getElementById('report-data').textContent).results;
  const indices = (node) => (node.dataset.results || '').split(' ').filter((s) => s !== '').map(Number);
  const groupOf = {};  // result index -> the id of its failure card
  document.querySelectorAll('#failures article, #gaps article').forEach((card) => {
    indices(card).forEach((i) => { groupOf[i] = card.id; });
  });

  const boxes = Array.from(document.querySelectorAll('#outcome-filter input'));
  const opInput = document.getElementById('op-filter');
  const deviceSelect = document.getElementById('device-filter');
  const dtypeSelect = document.getElementById('dtype-filter');

  function drawCell(td, shown) {
    td.textContent = '';
    if (shown.length === 0) { td.className = 'cell none'; return; }
    const worst = shown.reduce((a, i) => (SEVERITY[results[i].outcome] > SEVERITY[results[a].outcome] ? i : a), shown[0]);
    const outcome = results[worst].outcome;
    td.className = 'cell o-' + outcome + (isOk(outcome) ? '' : ' has-failure');
    if (isOk(outcome)) { td.textContent = SHORT[outcome]; return; }
    const link = document.createElement('a');
    link.href = '#' + groupOf[worst];
    link.textContent = SHORT[outcome];
    td.appendChild(link);
  }

  function apply() {
    const on = {};
    boxes.forEach((b) => { on[b.value] = b.checked; });
    const text = opInput.value.trim().toLowerCase();
    const show = results.map((r) => on[r.outcome] && (text === '' || r.op.toLowerCase().includes(text)) &&
      (deviceSelect.value === '' || '=' + r.device === deviceSelect.value) &&
      (dtypeSelect.value === '' || '=' + r.dtype === dtypeSelect.value));
    const count = show.filter((s) => s).length;
    document.getElementById('shown').textContent = 'showing ' + count + ' of ' + results.length + ' results';
    document.querySelectorAll('#matrix tbody tr').forEach((tr) => {
      let any = false;
      tr.querySelectorAll('td.cell').forEach((td) => {
        const shown = indices(td).filter((i) => show[i]);
        any = any || shown.length > 0;
        drawCell(td, shown);
      });
      tr.hidden = !any;
    });
    let notPassing = 0;
    document.querySelectorAll('#failures article').forEach((card) => {
      let any = false;
      card.querySelectorAll('li[data-results]').forEach((li) => {
        li.hidden = !show[indices(li)[0]];
        if (!li.hidden) { any = true; ++notPassing; }
      });
      card.hidden = !any;
    });
    document.getElementById('failures-count').textContent = String(notPassing);
  }

  document.getElementById('controls').hidden = false;
  [deviceSelect, dtypeSelect].concat(boxes).forEach((c) => c.addEventListener('change', apply));
  opInput.addEventListener('input', apply);
  apply();
})();
)js";

// Text for HTML content or a quoted attribute value.
std::string html(std::string_view raw) {
  const std::string s = detail::visible_text(raw);  // Note [Library strings are data]
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// JSON made safe inside <script>: the element ends at the first "</" + "script" whatever the
// JSON says, so "</" becomes "<\/" (the same string to JSON.parse). "<!--" becomes "\u003c!--":
// after it, a "<script" in the data would switch the HTML parser into a state where even our
// closing tag no longer ends the element. '<' occurs only inside JSON strings, where both
// escapes are valid.
std::string script_safe(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    if (json.substr(i, 2) == "</") {
      out += "<\\/";
      ++i;
    } else if (json.substr(i, 4) == "<!--") {
      out += "\\u003c";
    } else {
      out += json[i];
    }
  }
  return out;
}

// A name in the matrix: at most 160 characters shown, the rest counted (the title has it all).
std::string short_name(const std::string& name) { return detail::one_line_text(name, 160); }

// data-results="3 4 7": the results an element stands for, for the filter script.
std::string data_results(const std::vector<size_t>& indices) {
  std::string out;
  for (size_t i : indices) out += (out.empty() ? "" : " ") + std::to_string(i);
  return " data-results=\"" + out + "\"";
}

// The verdict and the untested cases, as static markup (no script needed to see them).
// Note [Untested is not a pass] (report.cpp).
std::string verdict_section(const Report& report) {
  const auto untested = untested_cases(report);
  const bool failed = fails(report);
  std::string out = "<section id=\"verdict\">\n<p class=\"verdict " + std::string(failed ? "fail" : "pass") +
                    "\">Verdict: " + (failed ? "FAIL" : "PASS") + (report.info.interrupted ? " (partial)" : "") +
                    " &mdash; " + std::to_string(findings(report).size()) + " findings, " + std::to_string(untested.size()) +
                    " untested case" + (untested.size() == 1 ? "" : "s") + "; fails on <code>" +
                    html(to_string(report.info.fail_on)) + "</code></p>\n";
  if (!untested.empty()) {
    out += "<h2>Untested (" + std::to_string(untested.size()) +
           ")</h2>\n<p>No check tested these cases: every one was skipped, unsupported or mistrusted.</p>\n"
           "<table class=\"untested\">\n";
    for (const UntestedCase& c : untested) {
      out += "<tr><td><code>" + html(c.key()) + "</code></td><td>";
      for (size_t k = 0; k < c.reasons.size(); ++k) out += (k ? "<br>" : "") + html(c.reasons[k]);
      out += "</td></tr>\n";
    }
    out += "</table>\n";
  }
  return out + "</section>\n";
}

// The run's facts and the totals per outcome.
std::string summary_section(const Report& report) {
  const RunInfo& info = report.info;
  std::string out = "<p id=\"run-info\" class=\"info\">";
  const auto add = [&](const char* name, const std::string& value, bool code) {
    if (value.empty()) return;
    out += std::string("<span>") + name + " " + (code ? "<code>" + html(value) + "</code>" : html(value)) + "</span>";
  };
  add("against", info.against, true);
  add("started", info.started_at, false);
  add("time", detail::fixed(report.seconds, 1) + " s", false);
  add("seed", info.seed == 0 ? std::string("fixed per case") : std::to_string(info.seed), false);
  add("samples", std::to_string(info.samples), false);
  add("shard", info.shard, true);
  add("opconform", info.tool_version, true);
  add("command", info.command, true);
  out += "</p>\n</header>\n<section id=\"totals\" class=\"totals\">\n<div class=\"total o-all\"><b>" +
         std::to_string(report.results.size()) + "</b>results</div>\n";
  for (Outcome o : detail::all_outcomes()) {
    const std::string name(conformance::to_string(o));
    out += "<div class=\"total o-" + name + "\"><b>" + std::to_string(report.count(o)) + "</b>" + name + "</div>\n";
  }
  return out + "</section>\n";
}

// The filters, hidden until the script shows them (they need it).
std::string controls_section(const Report& report) {
  std::string out = "<section id=\"controls\" class=\"controls\" hidden>\n<fieldset id=\"outcome-filter\"><legend>Outcomes</legend>";
  for (Outcome o : detail::all_outcomes()) {
    const std::string name(conformance::to_string(o));
    out += "<label for=\"show-" + name + "\"><input type=\"checkbox\" id=\"show-" + name + "\" value=\"" + name +
           "\" checked> <span class=\"swatch o-" + name + "\"></span>" + name + "</label>";
  }
  out += "</fieldset>\n<label>Op <input id=\"op-filter\" type=\"search\" placeholder=\"part of a name, e.g. aten::add\"></label>\n";
  const auto select = [&](const char* label, const char* id, std::string CaseResult::*field) {
    std::vector<std::string> values;
    for (const CaseResult& r : report.results) values.push_back(r.*field);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    out += std::string("<label>") + label + " <select id=\"" + id + "\"><option value=\"\">all</option>";
    for (const auto& v : values) out += "<option value=\"=" + html(v) + "\">" + (v.empty() ? "(none)" : html(v)) + "</option>";
    out += "</select></label>\n";
  };
  select("Device", "device-filter", &CaseResult::device);
  select("Dtype", "dtype-filter", &CaseResult::dtype);
  return out + "<span id=\"shown\"></span>\n</section>\n";
}

// The op x check matrix, each cell the worst outcome over devices and dtypes, a link to its
// failure card when that is not ok.
std::string matrix_section(const Report& report, const std::vector<std::string>& group_of) {
  std::string out = "<section>\n<h2>Ops &times; checks</h2>\n<div id=\"legend\" class=\"legend\">";
  for (Outcome o : detail::all_outcomes()) {
    const std::string name(conformance::to_string(o));
    out += "<span><span class=\"swatch o-" + name + "\"></span>" + name + " (" + html(detail::short_label(o)) + ")</span>";
  }
  out += "</div>\n<div class=\"matrix-wrap\"><table id=\"matrix\">\n";
  const detail::Matrix m = detail::op_check_matrix(report);
  if (m.ops.empty()) return out + "<tbody><tr><td class=\"none\">No results.</td></tr></tbody></table></div>\n</section>\n";
  out += "<thead><tr><th class=\"op\">op \\ check</th>";
  for (const auto& c : m.checks) out += "<th title=\"" + html(c) + "\"><span>" + html(c) + "</span></th>";
  out += "</tr></thead>\n<tbody>\n";
  for (size_t o = 0; o < m.ops.size(); ++o) {
    out += "<tr><th class=\"op\" scope=\"row\" title=\"" + html(m.ops[o]) + "\"><code>" + html(short_name(m.ops[o])) + "</code></th>";
    for (size_t c = 0; c < m.checks.size(); ++c) {
      const auto& cell = m.cells[o][c];
      if (cell.empty()) {
        out += "<td class=\"empty\"></td>";
        continue;
      }
      const size_t worst = detail::worst_of(report, cell);
      const Outcome outcome = report.results[worst].outcome;
      const std::string name(conformance::to_string(outcome));
      const std::string label(detail::short_label(outcome));
      out += "<td class=\"cell o-" + name + (detail::is_ok(outcome) ? "" : " has-failure") + "\" title=\"" +
             html(m.ops[o] + " " + m.checks[c] + "\n" + detail::outcome_counts(report, cell)) + "\"" + data_results(cell) + ">";
      out += detail::is_ok(outcome) ? label : "<a href=\"#" + group_of[worst] + "\">" + html(label) + "</a>";
      out += "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</tbody>\n</table></div>\n</section>\n";
}

// One card per finding (Note [One finding per cause] in conformance/cause.h): its title, what it
// covers (kind, check, ops, dtypes, devices), the lead result's message, minimal input and repro;
// every result folded below, each with its own repro line.
std::string finding_card(const Report& report, const Finding& f, const std::string& id) {
  const CaseResult& lead = report.results[f.lead];
  const std::string outcome(conformance::to_string(f.outcome));
  std::string out = "<article class=\"failure o-" + outcome + "\" id=\"" + id + "\"" + data_results(f.results) +
                    ">\n<h3><span class=\"badge o-" + outcome + "\">" + outcome + "</span>" + html(f.cause.title) +
                    " <span class=\"count\">" + std::to_string(f.results.size()) +
                    (f.results.size() == 1 ? " result" : " results") +
                    (f.expected == 0 ? std::string() : ", " + std::to_string(f.expected) + " expected") + "</span></h3>\n";
  out += "<p class=\"covers\"><code>" + html(f.key) + "</code><br>" +
         html(std::string(conformance::to_string(f.cause.kind))) + " &middot; " + html(f.check) + " &middot; ops: " +
         html(compact_list(f.ops)) + " &middot; dtypes: " + html(compact_list(f.dtypes, 12)) + " &middot; devices: " +
         html(compact_list(f.devices)) + "</p>\n";
  if (!lead.expected.empty()) out += "<p class=\"expected\">Expected: " + html(lead.expected) + "</p>\n";
  if (!lead.message.empty()) out += "<pre class=\"message\">" + html(lead.message) + "</pre>\n";
  if (lead.minimal_input) out += "<div class=\"label\">Minimal input</div><pre class=\"minimal\">" + html(*lead.minimal_input) + "</pre>";
  if (!lead.repro.empty()) out += "<div class=\"label\">Repro</div><div class=\"repro\"><code>" + html(lead.repro) + "</code></div>\n";
  out += std::string(f.results.size() > 1 ? "<details><summary>All " + std::to_string(f.results.size()) + " results</summary>" : "<details hidden>") +
         "\n<ul class=\"cases\">\n";
  for (size_t i : f.results) {
    const CaseResult& r = report.results[i];
    out += "<li id=\"result-" + std::to_string(i) + "\"" + data_results({i}) + "><span class=\"where\"><code>" + html(r.op) +
           "</code> " +
           html(r.device.empty() && r.dtype.empty() ? std::string("(no device or dtype)")
                                                    : "[" + r.device + (r.dtype.empty() ? "" : ", " + r.dtype) + "]") +
           "</span>";
    if (!r.repro.empty()) out += "<div class=\"repro\"><code>" + html(r.repro) + "</code></div>";
    out += "</li>\n";
  }
  return out + "</ul>\n</details>\n</article>\n";
}

std::string failures_section(const Report& report, const std::vector<Finding>& found) {
  size_t count = 0;
  for (const auto& f : found) count += f.results.size();
  std::string out = "<section>\n<h2 id=\"failures-title\">Findings: " + std::to_string(found.size()) +
                    " causes (<span id=\"failures-count\">" + std::to_string(count) +
                    "</span> results)</h2>\n<div id=\"failures\">\n";
  if (found.empty()) out += "<p class=\"none\">Nothing here: no result failed, crashed, timed out or was mistrusted.</p>\n";
  for (size_t k = 0; k < found.size(); ++k) out += finding_card(report, found[k], "finding-" + std::to_string(k));
  return out + "</div>\n</section>\n";
}

// Unsupported results by cause, apart from the failures, folded.
std::string gaps_section(const Report& report, const std::vector<Finding>& list) {
  if (list.empty()) return "";
  std::string out = "<section>\n<details id=\"gaps\"><summary><h2>Not implemented: " + std::to_string(list.size()) +
                    " causes (" + std::to_string(report.count(Outcome::unsupported)) + " unsupported results)</h2></summary>\n";
  for (size_t k = 0; k < list.size(); ++k) out += finding_card(report, list[k], "gap-" + std::to_string(k));
  return out + "</details>\n</section>\n";
}

std::string expectations_section(const Report& report) {
  if (report.expectations.empty()) return "";
  std::string out = "<section>\n<h2>Expectations (<code>" + html(report.info.expectations_file) +
                    "</code>)</h2>\n<table class=\"untested\">\n<tr><th>line</th><th>covers</th><th>outcome</th>"
                    "<th>results</th><th>status</th><th>until</th><th>reason</th></tr>\n";
  for (const auto& e : report.expectations)
    out += "<tr><td>" + std::to_string(e.line) + "</td><td><code>" + html(e.selector) + "</code></td><td>" +
           html(e.outcome) + "</td><td>" + std::to_string(e.matched) + "</td><td>" + html(std::string(to_string(e.status))) +
           "</td><td>" + html(e.until) + "</td><td>" + html(e.reason) + "</td></tr>\n";
  return out + "</table>\n</section>\n";
}

}  // namespace

std::string to_html(const Report& report) {
  const std::string library = html(report.info.library.empty() ? "(unnamed library)" : report.info.library);
  const auto found = findings(report);
  const auto missing = gaps(report);
  std::vector<std::string> group_of(report.results.size());  // result index -> its card's id
  for (size_t k = 0; k < found.size(); ++k)
    for (size_t i : found[k].results) group_of[i] = "finding-" + std::to_string(k);
  for (size_t k = 0; k < missing.size(); ++k)
    for (size_t i : missing[k].results) group_of[i] = "gap-" + std::to_string(k);
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += "<title>opconform report: " + library + "</title>\n";
  page += "<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
  page += "<header>\n<h1>opconform report: <code>" + library + "</code>" +
          (report.info.interrupted ? " (partial)" : "") + "</h1>\n";
  if (report.info.interrupted)
    page += "<p class=\"verdict fail\" id=\"partial\">Partial report: the run was stopped before every case ran; it "
            "holds the cases that finished.</p>\n";
  page += summary_section(report);
  page += verdict_section(report);
  page += controls_section(report);
  page += matrix_section(report, group_of);
  page += failures_section(report, found);
  page += gaps_section(report, missing);
  page += expectations_section(report);
  page += "<script type=\"application/json\" id=\"report-data\">\n" + script_safe(to_json(report)) + "</script>\n";
  page += "<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n";
  return page;
}

}  // namespace opconform::reports
