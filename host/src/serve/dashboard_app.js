// The live part of `GET /ui`, served as `/ui/app.js` from the binary (no inline script, so the
// page's Content-Security-Policy stays `script-src 'self'`). It subscribes to `/ui/events` and,
// as each update arrives, adds the call's point or the marker to the conversation's chart and
// bumps the table's counts, without a reload. The page reads the same without it. The chart is
// redrawn with the geometry the server draws it with (`dashboard.rs`: W, H, PAD, the marker
// shapes); every string from a conversation goes in as text, never as markup.
'use strict';
(function () {
  var NS = 'http://www.w3.org/2000/svg';
  var W = 720, H = 200, PAD = 40, MAX_CALLS = 2000;
  var COLORS = { compaction: '#8e44ad', cap: '#e67e22', prune: '#27ae60', flush: '#16a085' };
  var LABELS = { cap: 'tool result capped', prune: 'prune', flush: 'memory flush' };
  // The table's columns: session, engine, window use, turns, calls, compactions, caps,
  // prunes, flushes, last activity.
  var COLUMN = { turn: 3, call: 4, compaction: 5, cap: 6, prune: 7, flush: 8 };
  var charts = {};

  function num(n) { return Number(n).toLocaleString('en-US'); }

  function el(name, attrs, parent) {
    var node = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, String(attrs[k])); });
    if (parent) parent.appendChild(node);
    return node;
  }

  function shape(kind, x) {
    switch (kind) {
      case 'compaction': return 'M' + x.toFixed(1) + ' 36.0 l-5 -8 h10 z';
      case 'cap': return 'M' + (x - 4).toFixed(1) + ' 166 h8 v8 h-8 z';
      case 'prune': return 'M' + x.toFixed(1) + ' 177 l5 5 l-5 5 l-5 -5 z';
      default: return 'M' + (x - 4).toFixed(1) + ' 194 a4 4 0 1 0 8 0 a4 4 0 1 0 -8 0 z';
    }
  }

  // A chart's data, read back from what the server drew.
  function read(svg) {
    var c = { svg: svg, window: Number(svg.getAttribute('data-window')) || 0, calls: [], marks: [] };
    svg.querySelectorAll('circle.point').forEach(function (p) {
      c.calls.push(Number(p.getAttribute('data-t')) || 0);
    });
    svg.querySelectorAll('path[data-at]').forEach(function (m) {
      var link = m.parentNode.getAttribute('href');
      c.marks.push({ kind: m.getAttribute('class'), at: Number(m.getAttribute('data-at')) || 0,
        title: m.textContent, href: link });
    });
    return c;
  }

  function draw(c) {
    var svg = c.svg;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var n = c.calls.length;
    var peak = c.calls.reduce(function (a, b) { return Math.max(a, b); }, 0);
    var top = Math.max(Math.max(c.window, peak) * 1.08, 1);
    var x = function (i) { return PAD + (n <= 1 ? (W - 2 * PAD) / 2 : i * (W - 2 * PAD) / (n - 1)); };
    var y = function (t) { return H - PAD - (t / top) * (H - 2 * PAD); };
    if (c.window > 0) {
      var wy = y(c.window);
      el('line', { x1: PAD, y1: wy.toFixed(1), x2: (W - PAD).toFixed(1), y2: wy.toFixed(1),
        stroke: '#c0392b', 'stroke-dasharray': '6 4' }, svg);
      el('text', { x: (W - PAD).toFixed(1), y: (wy - 4).toFixed(1), 'font-size': 11,
        'text-anchor': 'end', fill: '#c0392b' }, svg).textContent = 'window ' + num(c.window);
    }
    el('polyline', { fill: 'none', stroke: '#2c6fbb', 'stroke-width': 1.5,
      points: c.calls.map(function (t, i) { return x(i).toFixed(1) + ',' + y(t).toFixed(1); }).join(' ') }, svg);
    c.calls.forEach(function (t, i) {
      var p = el('circle', { 'class': 'point', cx: x(i).toFixed(1), cy: y(t).toFixed(1), r: 2.5,
        fill: '#2c6fbb', 'data-t': t }, svg);
      el('title', {}, p).textContent = 'call ' + (i + 1) + ': ' + num(t) + ' tokens';
    });
    c.marks.forEach(function (m) {
      var parent = m.href ? el('a', { href: m.href }, svg) : svg;
      var at = Math.min(m.at, Math.max(n - 1, 0));
      var mark = el('path', { 'class': m.kind, d: shape(m.kind, x(at)), fill: COLORS[m.kind],
        'data-at': m.at }, parent);
      el('title', {}, mark).textContent = m.title;
    });
  }

  function chart(id) {
    if (charts[id]) return charts[id];
    var section = document.getElementById('s-' + id);
    var svg = section && section.querySelector('svg.chart');
    if (!svg) {
      section = document.createElement('section');
      section.id = 's-' + id;
      var h = section.appendChild(document.createElement('h2'));
      h.textContent = id;
      svg = el('svg', { 'class': 'chart', viewBox: '0 0 ' + W + ' ' + H, width: W, height: H,
        role: 'img', 'aria-label': 'prompt tokens per call against the window' }, section);
      document.body.appendChild(section);
    }
    charts[id] = read(svg);
    return charts[id];
  }

  function row(id, engine) {
    var table = document.getElementById('conversations');
    var r = document.getElementById('r-' + id);
    if (!r) {
      r = table.insertRow(-1);
      r.id = 'r-' + id;
      r.className = 'conversation';
      for (var i = 0; i < 10; i++) {
        var td = r.insertCell(-1);
        if (i >= 2 && i <= 8) { td.className = 'n'; td.textContent = i === 2 ? '-' : '0'; }
      }
      var a = r.cells[0].appendChild(document.createElement('a'));
      a.href = '#s-' + id;
      a.textContent = id;
      status();
    }
    // Most recently active first.
    var header = table.rows[0];
    if (header.nextSibling !== r) header.parentNode.insertBefore(r, header.nextSibling);
    if (engine) r.cells[1].textContent = engine;
    r.cells[9].textContent = '0s ago';
    return r;
  }

  function bump(cell) {
    cell.textContent = num((Number(cell.textContent.replace(/,/g, '')) || 0) + 1);
  }

  function compactionRow(id, c, k, u) {
    var section = c.svg.parentNode;
    var table = section.querySelector('table.compactions');
    if (!table) {
      table = document.createElement('table');
      table.className = 'compactions';
      var head = table.insertRow(-1);
      ['#', 'before call', 'reason', 'tokens before', 'tokens after', 'summary chars'].forEach(function (t) {
        head.appendChild(document.createElement('th')).textContent = t;
      });
      section.insertBefore(table, c.svg.nextSibling);
    }
    var r = table.insertRow(-1);
    r.id = 's-' + id + '-c' + k;
    var opt = function (v) { return v === undefined ? '-' : num(v); };
    [String(k + 1), String(u.call + 1), u.reason || '', opt(u.tokensBefore), opt(u.tokensAfter),
      opt(u.summaryChars)].forEach(function (v, i) {
      var td = r.insertCell(-1);
      if (i === 1 || i > 2) td.className = 'n';
      td.textContent = v;
    });
  }

  function update(u) {
    var id = String(u.conversation);
    var r = row(id, u.engine);
    if (COLUMN[u.kind] === undefined) return;
    bump(r.cells[COLUMN[u.kind]]);
    if (u.kind === 'turn') return;
    var c = chart(id);
    if (u.window) c.window = u.window;
    if (u.kind === 'call') {
      c.calls.push(u.promptTokens);
      if (c.calls.length > MAX_CALLS) {
        c.calls.shift();
        c.marks.forEach(function (m) { m.at = Math.max(m.at - 1, 0); });
      }
      r.cells[2].textContent = c.window > 0
        ? num(u.promptTokens) + ' / ' + num(c.window) + ' (' + Math.round(u.promptTokens * 100 / c.window) + '%)'
        : '-';
    } else if (u.kind === 'compaction') {
      var k = c.marks.filter(function (m) { return m.kind === 'compaction'; }).length;
      c.marks.push({ kind: 'compaction', at: u.call, title: 'compaction ' + (k + 1), href: '#s-' + id + '-c' + k });
      compactionRow(id, c, k, u);
    } else {
      c.marks.push({ kind: u.kind, at: u.call, title: LABELS[u.kind] + ' before call ' + (u.call + 1) });
    }
    draw(c);
  }

  function status() {
    var sub = document.querySelector('.sub');
    var n = document.querySelectorAll('#conversations tr.conversation').length;
    if (sub) sub.textContent = n + ' conversation(s), most recently active first. Live: updated as they happen.';
  }

  if (!window.EventSource || !document.getElementById('conversations')) return;
  status();
  var source = new EventSource('ui/events');
  var opened = false;
  source.addEventListener('open', function () {
    // A reconnection (the server restarted, or the stream ended): what was missed in between
    // is only on a fresh page.
    if (opened) window.location.reload();
    opened = true;
  });
  source.addEventListener('update', function (e) { update(JSON.parse(e.data)); });
  source.addEventListener('reload', function () { source.close(); window.location.reload(); });
})();
