// Expandable, sortable tree tables: the call tree (top-down), the bottom-up tree (functions
// with self time, then their callers) and the two halves of the sandwich (callers and callees
// of one function). A table shows one tree whose nodes have total, self and samples.
(function () {
  'use strict';
  var PV = window.PV, C = window.FlameCommon;
  var MAX_ROWS = 3000;

  // host: the element to fill; onPick(frame): a row was clicked.
  function TreeTable(host, onPick) {
    this.host = host; this.onPick = onPick; this.sort = 'total'; this.expanded = new Set();
    this.source = null; this.matcher = null; this.selectedFrame = -1;
    var self = this;
    host.addEventListener('click', function (ev) {
      var th = ev.target.closest('th[data-sort]');
      if (th) { self.sort = th.getAttribute('data-sort'); self.render(); return; }
      var tr = ev.target.closest('tr[data-id]');
      if (!tr) return;
      var id = +tr.getAttribute('data-id');
      if (ev.target.classList.contains('tw')) {
        if (self.expanded.has(id)) self.expanded.delete(id); else self.expanded.add(id);
        self.render();
      } else {
        self.selectedFrame = self.source.tree.frame[id];
        if (self.onPick) self.onPick(self.selectedFrame);
        self.render();
      }
    });
  }
  PV.TreeTable = TreeTable;

  // source: {m, tree, total[], samples[], self(id) or null, whole (the 100 %), unit, root,
  //          label}; a new tree object resets what is expanded.
  TreeTable.prototype.show = function (source) {
    if (!this.source || source.tree !== this.source.tree || source.root !== this.source.root) {
      this.expanded = new Set([source.root]);
      this.source = source;
      this.expandHot(source.root, 0);
    }
    this.source = source;
    this.render();
  };

  // Open the heaviest path a few levels down, as long as it holds most of its parent.
  TreeTable.prototype.expandHot = function (id, depth) {
    var s = this.source, kids = this.kids(id);
    if (!kids.length || depth > 12) return;
    this.expanded.add(id);
    var best = kids[0];
    if (s.total[best] >= 0.5 * s.total[id]) { this.expanded.add(best); this.expandHot(best, depth + 1); }
  };

  TreeTable.prototype.kids = function (id) {
    var s = this.source, by = this.sort, m = s.m;
    var kids = s.tree.kids[id].filter(function (k) { return s.total[k] > 0; });
    kids.sort(function (a, b) {
      if (by === 'name') {
        var na = PV.frameName(m, s.tree.frame[a]), nb = PV.frameName(m, s.tree.frame[b]);
        return na < nb ? -1 : na > nb ? 1 : 0;
      }
      if (by === 'self' && s.self) return (s.self(b) - s.self(a)) || (s.total[b] - s.total[a]);
      return s.total[b] - s.total[a];
    });
    return kids;
  };

  TreeTable.prototype.render = function () {
    var s = this.source;
    if (!s) return;
    var rows = [], self = this, more = 0;
    (function walk(id, depth) {
      var kids = self.kids(id);
      for (var k = 0; k < kids.length; k++) {
        if (rows.length >= MAX_ROWS) { more += 1; continue; }
        rows.push([kids[k], depth]);
        if (self.expanded.has(kids[k])) walk(kids[k], depth + 1);
      }
    })(s.root, 0);
    var unit = s.unit === 'ns' ? 'ms' : 'samples';
    var head = '<table class="tt"><thead><tr><th data-sort="total" class="num">Total</th>' +
      '<th data-sort="self" class="num">Self</th><th class="num">' + (unit === 'ms' ? 'Total ms' : 'Samples') +
      '</th><th data-sort="name">' + escapeHtml(s.label) + ' — sorted by ' + this.sort + '</th></tr></thead><tbody>';
    var body = rows.map(function (r) {
      var id = r[0], fr = s.tree.frame[id], name = PV.frameName(s.m, fr), dso = PV.frameDso(s.m, fr);
      var hasKids = s.tree.kids[id].some(function (k) { return s.total[k] > 0; });
      var cls = (self.matcher && (self.matcher.test(name) || self.matcher.test(dso)) ? 'match ' : '') +
                (fr === self.selectedFrame ? 'sel' : '');
      var own = s.self ? s.self(id) : null;
      var amount = unit === 'ms' ? (s.total[id] / 1e6).toFixed(3) : C.groupDigits(s.samples[id]);
      return '<tr data-id="' + id + '" class="' + cls + '"><td class="num">' + C.percent(s.total[id], s.whole) +
        '</td><td class="num">' + (own === null ? '' : C.percent(own, s.whole)) + '</td><td class="num">' + amount +
        '</td><td style="padding-left:' + (4 + 14 * r[1]) + 'px"><span class="tw">' +
        (hasKids ? (self.expanded.has(id) ? '▾' : '▸') : '·') + '</span> ' + escapeHtml(name) +
        (dso ? ' <span class="dso">' + escapeHtml(dso) + '</span>' : '') + '</td></tr>';
    }).join('');
    var note = more ? '<p class="note">' + C.groupDigits(more) + ' more rows not listed: collapse a branch to see them.</p>' : '';
    this.host.innerHTML = head + body + '</tbody></table>' + note;
  };

  function escapeHtml(text) {
    return String(text).replace(/[&<>"]/g, function (c) { return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]; });
  }
  PV.escapeHtml = escapeHtml;

  // The rows a table shows now (for tests): [{name, total, self, samples, depth}].
  TreeTable.prototype.rows = function () {
    var out = [], s = this.source;
    this.host.querySelectorAll('tr[data-id]').forEach(function (tr) {
      var id = +tr.getAttribute('data-id');
      out.push({ id: id, name: PV.frameName(s.m, s.tree.frame[id]), dso: PV.frameDso(s.m, s.tree.frame[id]),
                 total: s.total[id], self: s.self ? s.self(id) : null, samples: s.samples[id] });
    });
    return out;
  };
})();
