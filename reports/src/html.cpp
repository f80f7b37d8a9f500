// The HTML report (writers.h: to_html): one file that opens anywhere, offline, from a CI
// artifact. Everything is inline — style, script, data — and the data is the JSON report itself
// in a <script type="application/json"> element, so the page and `opconform report` read the
// same thing. The script builds every view from that data with textContent (never innerHTML),
// so nothing in a message can become markup.
#include <string>

#include "opconform/reports/detail/text.h"
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
#matrix td.cell.o-skipped, #matrix td.cell.o-unsupported, #matrix td.cell.o-mistrusted { color: var(--ink); }
#matrix td.cell.has-failure { cursor: pointer; }
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
.failure .repro code { display: block; padding: 6px 8px; background: #1f2328; color: #f6f8fa; border-radius: 4px;
                       white-space: pre-wrap; overflow-wrap: anywhere; }
)css";

// Builds the page from the JSON in #report-data. Plain ES2017, no libraries; every string from
// the report goes in through textContent or an attribute, never as markup.
constexpr const char* kScript = R"js(
(function () {
  'use strict';
  const OUTCOMES = ['passed', 'failed', 'skipped', 'unsupported', 'crashed', 'timed_out', 'mistrusted'];
  // The order of conformance::combine(): the worst outcome of a cell is the one shown.
  const SEVERITY = { skipped: 0, passed: 1, unsupported: 2, mistrusted: 3, timed_out: 4, crashed: 5, failed: 6 };
  const SHORT = { passed: 'ok', failed: 'FAIL', skipped: 'skip', unsupported: 'n/a', crashed: 'CRASH',
                  timed_out: 'TIME', mistrusted: '?' };
  const isOk = (o) => o === 'passed' || o === 'skipped';
  const report = JSON.parse(document.getElementById('report-data').textContent);
  const results = report.results;
  results.forEach((r, i) => { r.index = i; });

  // Characters that act instead of showing are shown as "\x1b" or "\u202e", as the other
  // writers do (Note [Library strings are data]): C0 but newline and tab, DEL, C1, bidi
  // controls, line and paragraph separators, U+FFFE and U+FFFF.
  const visible = (s) => String(s)
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, (c) => '\\x' + c.charCodeAt(0).toString(16).padStart(2, '0'))
    .replace(/[\u0080-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufffe\uffff]/g,
      (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
  // A name in the matrix: at most 160 characters shown, the rest counted (the title has it all).
  const shortName = (s) => s.length > 160 ? s.slice(0, 160) + '... (' + (s.length - 160) + ' more characters)' : s;
  function el(tag, props, children) {
    const node = document.createElement(tag);
    Object.entries(props || {}).forEach(([key, value]) => {
      if (key === 'text') node.textContent = visible(value);
      else if (key === 'className') node.className = value;
      else node.setAttribute(key, visible(value));
    });
    (children || []).forEach((child) => node.appendChild(typeof child === 'string' ? document.createTextNode(visible(child)) : child));
    return node;
  }
  const where = (r) => r.check + (r.device || r.dtype ? ' [' + r.device + (r.dtype ? ', ' + r.dtype : '') + ']' : '');
  const unique = (values) => Array.from(new Set(values)).sort();

  // ---- run information and totals (over the whole report, whatever the filters)
  const info = report.info;
  const infoLine = document.getElementById('run-info');
  const addInfo = (name, value, code) => {
    if (value === '' || value === undefined) return;
    infoLine.appendChild(el('span', {}, [name + ' ', code ? el('code', { text: String(value) }) : String(value)]));
  };
  addInfo('against', info.against, true);
  addInfo('started', info.started_at);
  addInfo('time', report.seconds.toFixed(1) + ' s');
  addInfo('seed', info.seed === 0 ? 'fixed per case' : info.seed);
  addInfo('samples', info.samples);
  addInfo('shard', info.shard, true);
  addInfo('opconform', info.tool_version, true);
  addInfo('command', info.command, true);

  const totals = document.getElementById('totals');
  totals.appendChild(el('div', { className: 'total o-all' }, [el('b', { text: String(results.length) }), 'results']));
  OUTCOMES.forEach((o) => {
    totals.appendChild(el('div', { className: 'total o-' + o }, [el('b', { text: String(report.summary[o]) }), o]));
  });

  // ---- filters
  const outcomeBoxes = {};
  const outcomeFilter = document.getElementById('outcome-filter');
  OUTCOMES.forEach((o) => {
    const box = el('input', { type: 'checkbox', id: 'show-' + o, value: o });
    box.checked = true;
    outcomeBoxes[o] = box;
    outcomeFilter.appendChild(el('label', { for: 'show-' + o }, [box, ' ', el('span', { className: 'swatch o-' + o }), o]));
  });
  const fillSelect = (select, values) => {
    values.forEach((v) => select.appendChild(el('option', { value: '=' + v, text: v === '' ? '(none)' : v })));
  };
  const deviceSelect = document.getElementById('device-filter');
  const dtypeSelect = document.getElementById('dtype-filter');
  const opInput = document.getElementById('op-filter');
  fillSelect(deviceSelect, unique(results.map((r) => r.device)));
  fillSelect(dtypeSelect, unique(results.map((r) => r.dtype)));

  const legend = document.getElementById('legend');
  OUTCOMES.forEach((o) => {
    legend.appendChild(el('span', {}, [el('span', { className: 'swatch o-' + o }), o + ' (' + SHORT[o] + ')']));
  });

  function visibleResults() {
    const text = opInput.value.trim().toLowerCase();
    const device = deviceSelect.value;
    const dtype = dtypeSelect.value;
    return results.filter((r) => outcomeBoxes[r.outcome].checked &&
      (text === '' || r.op.toLowerCase().includes(text)) &&
      (device === '' || '=' + r.device === device) &&
      (dtype === '' || '=' + r.dtype === dtype));
  }

  // ---- the matrix: ops x checks, each cell the worst outcome over devices and dtypes
  function renderMatrix(shown) {
    const table = document.getElementById('matrix');
    table.textContent = '';
    if (shown.length === 0) {
      table.appendChild(el('tbody', {}, [el('tr', {}, [el('td', { className: 'none', text: 'No results match the filters.' })])]));
      return;
    }
    const checks = unique(shown.map((r) => r.check));
    const cells = new Map();  // op -> Map(check -> results)
    shown.forEach((r) => {
      if (!cells.has(r.op)) cells.set(r.op, new Map());
      const row = cells.get(r.op);
      if (!row.has(r.check)) row.set(r.check, []);
      row.get(r.check).push(r);
    });
    const head = el('tr', {}, [el('th', { className: 'op', text: 'op \\ check' })]);
    checks.forEach((c) => head.appendChild(el('th', { title: c }, [el('span', { text: c })])));
    const body = el('tbody');
    Array.from(cells.keys()).sort().forEach((op) => {
      const tr = el('tr', {}, [el('th', { className: 'op', scope: 'row', title: op }, [el('code', { text: shortName(op) })])]);
      const row = cells.get(op);
      checks.forEach((check) => {
        const list = row.get(check);
        if (!list) { tr.appendChild(el('td', { className: 'empty' })); return; }
        const worst = list.reduce((a, r) => (SEVERITY[r.outcome] > SEVERITY[a.outcome] ? r : a), list[0]);
        const title = op + ' ' + check + '\n' + list.map((r) => (r.device || '-') + ' ' + (r.dtype || '-') + ': ' + r.outcome).join('\n');
        const td = el('td', { className: 'cell o-' + worst.outcome, title: title, text: SHORT[worst.outcome] });
        if (!isOk(worst.outcome)) {
          td.classList.add('has-failure');
          td.addEventListener('click', () => { location.hash = 'result-' + worst.index; });
        }
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.appendChild(el('thead', {}, [head]));
    table.appendChild(body);
  }

  // ---- every result that is not ok, in run order
  function renderFailures(shown) {
    const list = document.getElementById('failures');
    list.textContent = '';
    const bad = shown.filter((r) => !isOk(r.outcome));
    document.getElementById('failures-title').textContent = 'Not passing (' + bad.length + ')';
    if (bad.length === 0) {
      list.appendChild(el('p', { className: 'none', text: 'Nothing here: every shown result passed or was skipped.' }));
      return;
    }
    bad.forEach((r) => {
      const item = el('article', { className: 'failure o-' + r.outcome, id: 'result-' + r.index }, [
        el('h3', {}, [el('span', { className: 'badge o-' + r.outcome, text: r.outcome }), el('code', { text: r.op }), ' ' + where(r)])]);
      if (r.message) item.appendChild(el('pre', { className: 'message', text: r.message }));
      if (r.minimal_input !== null) {
        item.appendChild(el('div', { className: 'label', text: 'Minimal input' }));
        item.appendChild(el('pre', { className: 'minimal', text: r.minimal_input }));
      }
      if (r.repro) {
        item.appendChild(el('div', { className: 'label', text: 'Repro' }));
        item.appendChild(el('div', { className: 'repro' }, [el('code', { text: r.repro })]));
      }
      list.appendChild(item);
    });
  }

  function render() {
    const shown = visibleResults();
    document.getElementById('shown').textContent = 'showing ' + shown.length + ' of ' + results.length + ' results';
    renderMatrix(shown);
    renderFailures(shown);
  }
  [deviceSelect, dtypeSelect].concat(Object.values(outcomeBoxes)).forEach((c) => c.addEventListener('change', render));
  opInput.addEventListener('input', render);
  render();
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

// The verdict and the untested cases, as static markup (no script needed to see them).
// Note [Untested is not a pass] (report.cpp).
std::string verdict_section(const Report& report) {
  const auto untested = untested_cases(report);
  const bool failed = fails(report);
  std::string out = "<section id=\"verdict\">\n<p class=\"verdict " + std::string(failed ? "fail" : "pass") +
                    "\">Verdict: " + (failed ? "FAIL" : "PASS") + " &mdash; " + std::to_string(untested.size()) +
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

}  // namespace

std::string to_html(const Report& report) {
  const std::string library = html(report.info.library.empty() ? "(unnamed library)" : report.info.library);
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += "<title>opconform report: " + library + "</title>\n";
  page += "<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
  page += "<header>\n<h1>opconform report: <code>" + library + "</code></h1>\n<p id=\"run-info\" class=\"info\"></p>\n</header>\n";
  page += "<noscript><p>This report is drawn by JavaScript, which is off; the results are the JSON in the "
          "element with id \"report-data\" in this file's source.</p></noscript>\n";
  page += "<section id=\"totals\" class=\"totals\"></section>\n";
  page += verdict_section(report);
  page += "<section class=\"controls\">\n"
          "<fieldset id=\"outcome-filter\"><legend>Outcomes</legend></fieldset>\n"
          "<label>Op <input id=\"op-filter\" type=\"search\" placeholder=\"part of a name, e.g. aten::add\"></label>\n"
          "<label>Device <select id=\"device-filter\"><option value=\"\">all</option></select></label>\n"
          "<label>Dtype <select id=\"dtype-filter\"><option value=\"\">all</option></select></label>\n"
          "<span id=\"shown\"></span>\n</section>\n";
  page += "<section>\n<h2>Ops &times; checks</h2>\n<div id=\"legend\" class=\"legend\"></div>\n"
          "<div class=\"matrix-wrap\"><table id=\"matrix\"></table></div>\n</section>\n";
  page += "<section>\n<h2 id=\"failures-title\">Not passing</h2>\n<div id=\"failures\"></div>\n</section>\n";
  page += "<script type=\"application/json\" id=\"report-data\">\n" + script_safe(to_json(report)) + "</script>\n";
  page += "<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n";
  return page;
}

}  // namespace opconform::reports
