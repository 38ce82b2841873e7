// The flame graph (or icicle) of the selection, from a Forest's top-down tree: click a frame
// to zoom, search highlights matches (and says their share), the tooltip shows the frame's
// samples and its hottest source lines. Colours and search come from flamecommon.js.
(function () {
  'use strict';
  var PV = window.PV, C = window.FlameCommon;
  var ROW = 18, MIN_PX = 0.35;

  function Flame(canvas, tooltip, details, onPick) {
    this.canvas = canvas; this.ctx = canvas.getContext('2d'); this.tooltip = tooltip; this.details = details;
    this.onPick = onPick;
    this.zoom = 0; this.inverted = false; this.matcher = null; this.drawn = [];
    this.hidden = 0;
    this.bind();
  }
  PV.Flame = Flame;

  Flame.prototype.show = function (forest, weights) {
    if (forest !== this.forest) this.zoom = 0;
    this.forest = forest; this.w = weights;
    if (this.zoom && !(weights.total[this.zoom] > 0)) this.zoom = 0;
    this.draw();
  };

  Flame.prototype.color = function (id) {
    var m = this.forest.m, f = this.forest.top.frame[id];
    if (this.matches(id)) return C.MATCH_COLOR;
    return C.kindColor(PV.frameKind(m, f), PV.frameName(m, f), this.waitOf(id));
  };

  Flame.prototype.matches = function (id) {
    if (!this.matcher || id === 0) return false;
    var m = this.forest.m, f = this.forest.top.frame[id];
    return this.matcher.test(PV.frameName(m, f)) || this.matcher.test(PV.frameDso(m, f));
  };

  // Frames of an off-CPU stack are coloured by the thread state at their root.
  Flame.prototype.waitOf = function (id) {
    var tree = this.forest.top, m = this.forest.m;
    for (var a = id; a > 0; a = tree.parent[a]) {
      if (PV.frameKind(m, tree.frame[a]) === 'state') return C.waitOfLabel(PV.frameName(m, tree.frame[a]));
    }
    return '';
  };

  Flame.prototype.depthOf = function (id) {
    var d = 0;
    for (var a = id; a > 0; a = this.forest.top.parent[a]) d++;
    return d;
  };

  Flame.prototype.draw = function () {
    var t0 = performance.now();
    var tree = this.forest.top, total = this.w.total, self = this;
    var width = Math.max(1, this.canvas.clientWidth), maxDepth = 0, zoomDepth = this.depthOf(this.zoom);
    // depth of the drawn part (zoom and below, plus the zoomed frame's ancestors)
    (function deepest(id, d) {
      if (d > maxDepth) maxDepth = d;
      var kids = tree.kids[id];
      for (var k = 0; k < kids.length; k++) if (total[kids[k]] * width / (total[self.zoom] || 1) >= MIN_PX) deepest(kids[k], d + 1);
    })(this.zoom, zoomDepth);
    this.maxDepth = maxDepth;
    var height = (maxDepth + 1) * ROW, ratio = window.devicePixelRatio || 1, ctx = this.ctx;
    this.canvas.style.height = height + 'px';
    this.canvas.width = Math.round(width * ratio);
    this.canvas.height = Math.round(height * ratio);
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.font = C.FONT;
    ctx.textBaseline = 'middle';
    this.charWidth = ctx.measureText('MMMMMMMMMM').width / 10 || 7;
    this.drawn = [];
    this.hidden = 0;
    this.matched = 0;
    for (var a = tree.parent[this.zoom], d = zoomDepth - 1; a >= 0; a = tree.parent[a], d--) this.frame(a, 0, width, d, true);
    var scale = total[this.zoom] > 0 ? width / total[this.zoom] : 0;
    this.layout(this.zoom, 0, zoomDepth, scale);
    this.drawMs = performance.now() - t0;
  };

  Flame.prototype.layout = function (id, x, depth, scale) {
    var w = this.w.total[id] * scale;
    if (w < MIN_PX) { this.hidden++; return; }
    var matched = this.matches(id);
    this.frame(id, x, w, depth, false);
    if (matched) this.matched += this.w.total[id];
    var kids = this.forest.sortedKids(this.forest.top, id), cursor = x;
    for (var k = 0; k < kids.length; k++) {
      var c = kids[k];
      if (!(this.w.total[c] > 0)) continue;
      if (matched) { var save = this.matched; this.layout(c, cursor, depth + 1, scale); this.matched = save; }
      else this.layout(c, cursor, depth + 1, scale);
      cursor += this.w.total[c] * scale;
    }
  };

  Flame.prototype.rowY = function (depth) { return this.inverted ? depth * ROW : (this.maxDepth - depth) * ROW; };

  Flame.prototype.frame = function (id, x, w, depth, dim) {
    var ctx = this.ctx, y = this.rowY(depth), m = this.forest.m;
    ctx.globalAlpha = dim ? 0.5 : 1;
    ctx.fillStyle = this.color(id);
    ctx.fillRect(x, y, Math.max(w - 0.5, 0.35), ROW - 1);
    var room = Math.floor((w - 6) / this.charWidth);
    if (room >= 3) {
      var name = PV.frameName(m, this.forest.top.frame[id]);
      ctx.fillStyle = '#000';
      ctx.fillText(name.length <= room ? name : name.slice(0, room - 2) + '..', x + 3, y + ROW / 2);
    }
    ctx.globalAlpha = 1;
    this.drawn.push({ id: id, x: x, y: y, w: w, dim: dim });
  };

  Flame.prototype.hit = function (clientX, clientY) {
    var box = this.canvas.getBoundingClientRect(), x = clientX - box.left, y = clientY - box.top;
    for (var k = this.drawn.length - 1; k >= 0; k--) {
      var d = this.drawn[k];
      if (y >= d.y && y < d.y + ROW && x >= d.x && x < d.x + d.w) return d.id;
    }
    return -1;
  };

  // The hottest source lines of a tree node (its frame's line in each stack through it).
  Flame.prototype.lines = function (id) {
    var f = this.forest, m = f.m, t = f.tallied, acc = new Map(), sum = 0;
    t.weight.forEach(function (w, key) {
      var tn = f.topNode(key);
      for (var n = key % m.nNodes; n >= 0; n = m.prefix[n], tn = f.top.parent[tn]) {
        if (tn === id) { if (m.line[n] !== 0xffffffff && m.line[n] >= 0) { acc.set(m.line[n], (acc.get(m.line[n]) || 0) + w); sum += w; } break; }
      }
    });
    return Array.from(acc.entries()).sort(function (a, b) { return b[1] - a[1]; }).slice(0, 3)
      .map(function (e) { return m.strings[e[0]] + ' (' + C.percent(e[1], sum) + ')'; });
  };

  Flame.prototype.describe = function (id) {
    var f = this.forest, m = f.m, fr = f.top.frame[id], out = [PV.frameName(m, fr)];
    var dso = PV.frameDso(m, fr);
    if (dso) out.push(dso + ' (' + PV.frameKind(m, fr) + ')');
    var text = C.groupDigits(this.w.samples[id]) + ' samples';
    if (f.ev.weight === 'period') text += ', ' + C.groupDigits(Math.round(this.w.total[id])) + ' ns';
    text += ', ' + C.percent(this.w.total[id], this.w.total[0]) + ' of selection';
    if (this.zoom) text += ', ' + C.percent(this.w.total[id], this.w.total[this.zoom]) + ' of zoomed frame';
    out.push(text);
    var lines = this.lines(id);
    if (lines.length) out.push('source: ' + lines.join(', '));
    return out;
  };

  Flame.prototype.bind = function () {
    var self = this;
    this.canvas.addEventListener('mousemove', function (ev) {
      var id = self.hit(ev.clientX, ev.clientY);
      if (id < 0) { self.tooltip.hidden = true; return; }
      var lines = self.describe(id);
      self.details.textContent = lines.join(' — ');
      self.tooltip.textContent = lines.join('\n');
      self.tooltip.hidden = false;
      var host = self.tooltip.parentElement.getBoundingClientRect();
      var left = ev.clientX - host.left + 14;
      if (left + self.tooltip.offsetWidth > host.width) left = Math.max(0, ev.clientX - host.left - self.tooltip.offsetWidth - 14);
      self.tooltip.style.left = left + 'px';
      self.tooltip.style.top = (ev.clientY - host.top + 14) + 'px';
    });
    this.canvas.addEventListener('mouseleave', function () { self.tooltip.hidden = true; });
    this.canvas.addEventListener('click', function (ev) {
      var id = self.hit(ev.clientX, ev.clientY);
      if (id < 0) return;
      self.zoom = id;
      self.draw();
      if (self.onPick) self.onPick(self.forest.top.frame[id]);
    });
  };
})();
