// The live part of `GET /ui`, served as `/ui/app.js` from the binary (no inline script, so the
// page's Content-Security-Policy stays `script-src 'self'`). It subscribes to `/ui/events` and,
// as each update arrives, bumps the table's counts, adds a compaction's row (linking to its
// detail page) and a capped result's link to its original, and swaps in the conversation's
// chart as the server draws it (`ui/conversations/<id>/chart`: one chart component, in
// `chart.rs`, draws the page, the live chart and the replay report). The page reads the same
// without it. Every string from a conversation goes in as text, never as markup.
'use strict';
(function () {
  // The table's columns: session, engine, window use, turns, calls, compactions, caps,
  // prunes, flushes, last activity, spend.
  var COLUMN = { turn: 3, call: 4, compaction: 5, cap: 6, prune: 7, flush: 8 };
  var CELLS = 11;
  var pending = {};

  function num(n) { return Number(n).toLocaleString('en-US'); }

  // A session id as one URL path segment and as the page's anchors spell it (`html.rs`).
  function segment(id) {
    var out = encodeURIComponent(id).replace(/[!'()*]/g, function (c) {
      return '%' + c.charCodeAt(0).toString(16).toUpperCase();
    });
    if (out === '.') return '%2E';
    if (out === '..') return '%2E%2E';
    return out;
  }

  function base(id) { return 'ui/conversations/' + segment(id); }

  function section(id) {
    var s = document.getElementById('s-' + segment(id));
    if (s) return s;
    s = document.createElement('section');
    s.id = 's-' + segment(id);
    s.className = 'conversation-detail';
    s.appendChild(document.createElement('h2')).textContent = id;
    var table = s.appendChild(document.createElement('table'));
    table.className = 'compactions';
    var head = table.insertRow(-1);
    ['#', 'before call', 'reason', 'tokens before', 'tokens after', 'summary chars', ''].forEach(function (t) {
      head.appendChild(document.createElement('th')).textContent = t;
    });
    var blobs = s.appendChild(document.createElement('p'));
    blobs.className = 'blobs';
    blobs.textContent = 'Capped results, originals kept as blobs:';
    document.body.appendChild(s);
    return s;
  }

  // Fetches the conversation's chart as the server draws it and puts it in place of the
  // page's. One fetch per conversation at a time: updates arriving meanwhile ask for one more
  // when it is done (no timer, so a page under a headless browser's virtual time draws too).
  function refresh(id) {
    if (pending[id]) { pending[id] = 'again'; return; }
    pending[id] = 'fetching';
    fetch(base(id) + '/chart', { credentials: 'same-origin', cache: 'no-store' })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, 'image/svg+xml');
        var svg = doc.documentElement;
        if (!svg || svg.nodeName !== 'svg') return;
        var s = section(id);
        var fresh = document.importNode(svg, true);
        var old = s.querySelector('svg.chart');
        if (old) s.replaceChild(fresh, old);
        else s.insertBefore(fresh, s.querySelector('table.compactions'));
      })
      .catch(function () { /* the page still counts; a reload draws the chart */ })
      .then(function () {
        var again = pending[id] === 'again';
        delete pending[id];
        if (again) refresh(id);
      });
  }

  function row(id, engine) {
    var table = document.getElementById('conversations');
    var r = document.getElementById('r-' + id);
    if (!r) {
      r = table.insertRow(-1);
      r.id = 'r-' + id;
      r.className = 'conversation';
      for (var i = 0; i < CELLS; i++) {
        var td = r.insertCell(-1);
        if ((i >= 2 && i <= 8) || i === 10) { td.className = 'n'; td.textContent = i === 2 ? '-' : '0'; }
      }
      var a = r.cells[0].appendChild(document.createElement('a'));
      a.href = '#s-' + segment(id);
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

  function compactionRow(id, u) {
    var table = section(id).querySelector('table.compactions');
    var k = u.compaction - 1;
    var r = table.insertRow(-1);
    r.id = 's-' + segment(id) + '-c' + k;
    var opt = function (v) { return v === undefined ? '-' : num(v); };
    [String(u.compaction), String(u.call + 1), u.reason || '', opt(u.tokensBefore), opt(u.tokensAfter),
      opt(u.summaryChars)].forEach(function (v, i) {
      var td = r.insertCell(-1);
      if (i === 1 || i > 2) td.className = 'n';
      td.textContent = v;
    });
    var a = r.insertCell(-1).appendChild(document.createElement('a'));
    a.className = 'detail';
    a.href = base(id) + '/compactions/' + u.compaction;
    a.textContent = 'what it removed';
  }

  function blobLink(id, blob) {
    if (!/^sha256:[0-9a-f]{64}$/.test(blob)) return;
    var p = section(id).querySelector('p.blobs');
    p.appendChild(document.createTextNode(' '));
    var a = p.appendChild(document.createElement('a'));
    a.className = 'blob';
    a.href = 'ui/blobs/' + blob;
    a.appendChild(document.createElement('code')).textContent = blob;
  }

  function update(u) {
    var id = String(u.conversation);
    var r = row(id, u.engine);
    if (COLUMN[u.kind] === undefined) return;
    bump(r.cells[COLUMN[u.kind]]);
    if (u.kind === 'turn') return;
    if (u.spend !== undefined) r.cells[10].textContent = u.spend;
    if (u.kind === 'call') {
      r.cells[2].textContent = u.window > 0
        ? num(u.promptTokens) + ' / ' + num(u.window) + ' (' + Math.round(u.promptTokens * 100 / u.window) + '%)'
        : '-';
    } else if (u.kind === 'compaction' && u.compaction) {
      compactionRow(id, u);
    } else if (u.kind === 'cap' && u.blob) {
      blobLink(id, u.blob);
    }
    refresh(id);
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
