// Expandable, sortable tree tables: the call tree (top-down), the bottom-up tree (functions
// with self time, then their callers) and the two halves of the sandwich (callers and callees
// of one function). A table shows one tree whose nodes have total, self and samples.
(function () {
  'use strict';
  var PV = window.PV, C = window.FlameCommon;
  var MAX_ROWS = 600;  // rows listed at most (the rest is said): a longer table costs more to lay out than the trees

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
        self.selectedFrame = self.source.vt.frame(id);
        if (self.onPick) self.onPick(self.selectedFrame);
        self.render();
      }
    });
  }
  PV.TreeTable = TreeTable;

  // source: {m, vt (a view tree, view-trees.js), whole (the 100 %), unit, key, label}; a new
  // key (another tree, not another selection of the same) resets what is expanded.
  TreeTable.prototype.show = function (source) {
    if (!this.source || source.key !== this.source.key) {
      this.expanded = new Set([source.vt.root]);
      this.source = source;
      this.expandHot(source.vt.root, 0);
    }
    this.source = source;
    this.render();
  };

  // Open the heaviest path a few levels down, as long as it holds most of its parent.
  TreeTable.prototype.expandHot = function (id, depth) {
    var vt = this.source.vt, kids = this.kids(id);
    if (!kids.length || depth > 12) return;
    this.expanded.add(id);
    var best = kids[0];
    if (vt.total(best) >= 0.5 * vt.total(id)) { this.expanded.add(best); this.expandHot(best, depth + 1); }
  };

  TreeTable.prototype.kids = function (id) {
    var vt = this.source.vt, by = this.sort;
    var kids = Array.prototype.filter.call(vt.kids(id), function (k) { return vt.total(k) > 0; });
    if (by === 'name') return kids;  // view trees list children by name
    return kids.sort(function (a, b) {
      if (by === 'self') return ((vt.self(b) || 0) - (vt.self(a) || 0)) || (vt.total(b) - vt.total(a));
      return vt.total(b) - vt.total(a);
    });
  };

  TreeTable.prototype.render = function () {
    var s = this.source;
    if (!s) return;
    var vt = s.vt, rows = [], self = this, more = 0;
    (function walk(id, depth) {
      var kids = self.kids(id);
      for (var k = 0; k < kids.length; k++) {
        if (rows.length >= MAX_ROWS) { more += 1; continue; }
        rows.push([kids[k], depth]);
        if (self.expanded.has(kids[k])) walk(kids[k], depth + 1);
      }
    })(vt.root, 0);
    var unit = s.unit === 'ns' ? 'ms' : 'samples';
    var head = '<table class="tt"><thead><tr><th data-sort="total" class="num">Total</th>' +
      '<th data-sort="self" class="num">Self</th><th class="num">' + (unit === 'ms' ? 'Total ms' : 'Samples') +
      '</th><th data-sort="name">' + escapeHtml(s.label) + ' — sorted by ' + this.sort + '</th></tr></thead><tbody>';
    var body = rows.map(function (r) {
      var id = r[0], fr = vt.frame(id), name = PV.frameName(s.m, fr), dso = PV.frameDso(s.m, fr);
      var hasKids = Array.prototype.some.call(vt.kids(id), function (k) { return vt.total(k) > 0; });
      var cls = (self.matcher && (self.matcher.test(name) || self.matcher.test(dso)) ? 'match ' : '') +
                (fr === self.selectedFrame ? 'sel' : '');
      var own = vt.self(id);
      var amount = unit === 'ms' ? (vt.total(id) / 1e6).toFixed(3) : C.groupDigits(vt.samples(id));
      return '<tr data-id="' + id + '" class="' + cls + '"><td class="num">' + C.percent(vt.total(id), s.whole) +
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
    var out = [], s = this.source, vt = s.vt;
    this.host.querySelectorAll('tr[data-id]').forEach(function (tr) {
      var id = +tr.getAttribute('data-id');
      out.push({ id: id, name: PV.frameName(s.m, vt.frame(id)), dso: PV.frameDso(s.m, vt.frame(id)),
                 total: vt.total(id), self: vt.self(id), samples: vt.samples(id) });
    });
    return out;
  };
})();
