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

  // forest: the selection's Forest; its .top is the view tree drawn.
  Flame.prototype.show = function (forest) {
    if (forest !== this.forest) this.zoom = 0;
    this.forest = forest; this.vt = forest.top;
    if (this.zoom && !(this.vt.total(this.zoom) > 0)) this.zoom = 0;
    this.draw();
  };

  Flame.prototype.color = function (id) {
    var m = this.forest.m, f = this.vt.frame(id);
    if (this.matches(id)) return C.MATCH_COLOR;
    return C.kindColor(PV.frameKind(m, f), PV.frameName(m, f), this.waitOf(id));
  };

  Flame.prototype.matches = function (id) {
    if (!this.matcher || id === 0) return false;
    var m = this.forest.m, f = this.vt.frame(id);
    return this.matcher.test(PV.frameName(m, f)) || this.matcher.test(PV.frameDso(m, f));
  };

  // Frames of an off-CPU stack are coloured by the thread state at their root.
  Flame.prototype.waitOf = function (id) {
    var vt = this.vt, m = this.forest.m;
    for (var a = id; a > 0; a = vt.parent(a)) {
      if (PV.frameKind(m, vt.frame(a)) === 'state') return C.waitOfLabel(PV.frameName(m, vt.frame(a)));
    }
    return '';
  };

  Flame.prototype.depthOf = function (id) {
    var d = 0;
    for (var a = id; a > 0; a = this.vt.parent(a)) d++;
    return d;
  };

  // Calls visit(id, x, w, depth) for every frame wide enough to draw, zoomed frame first, in
  // drawing order; returns the depth of the deepest.
  Flame.prototype.walk = function (width, visit) {
    var vt = this.vt, zoom = this.zoom, scale = vt.total(zoom) > 0 ? width / vt.total(zoom) : 0, deepest = 0;
    var hidden = 0;
    (function go(id, x, depth) {
      var w = vt.total(id) * scale;
      if (w < MIN_PX) { hidden++; return; }
      if (depth > deepest) deepest = depth;
      visit(id, x, w, depth);
      var kids = vt.kids(id), cursor = x;
      for (var k = 0; k < kids.length; k++) {
        var t = vt.total(kids[k]);
        if (!(t > 0)) continue;
        go(kids[k], cursor, depth + 1);
        cursor += t * scale;
      }
    })(zoom, 0, this.depthOf(zoom));
    this.hidden = hidden;
    return deepest;
  };

  Flame.prototype.draw = function () {
    var t0 = performance.now(), vt = this.vt, width = Math.max(1, this.canvas.clientWidth);
    var boxes = [];
    var maxDepth = this.walk(width, function (id, x, w, depth) { boxes.push(id, x, w, depth); });
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
    var d = this.depthOf(this.zoom) - 1;
    for (var a = vt.parent(this.zoom); a >= 0; a = vt.parent(a), d--) this.frame(a, 0, width, d, true);
    for (var k = 0; k < boxes.length; k += 4) this.frame(boxes[k], boxes[k + 1], boxes[k + 2], boxes[k + 3], false);
    this.drawMs = performance.now() - t0;
  };

  Flame.prototype.rowY = function (depth) { return this.inverted ? depth * ROW : (this.maxDepth - depth) * ROW; };

  Flame.prototype.frame = function (id, x, w, depth, dim) {
    var ctx = this.ctx, y = this.rowY(depth), m = this.forest.m;
    ctx.globalAlpha = dim ? 0.5 : 1;
    ctx.fillStyle = this.color(id);
    ctx.fillRect(x, y, Math.max(w - 0.5, 0.35), ROW - 1);
    var room = Math.floor((w - 6) / this.charWidth);
    if (room >= 3) {
      var name = PV.frameName(m, this.vt.frame(id));
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

  // The hottest source lines of a node (its frame's line in each stack through it).
  Flame.prototype.lines = function (id) {
    var m = this.forest.m, mid = this.vt.mergedId(id);
    if (mid <= 0) return [];
    var r = this.forest.lines(mid, this.vt.threadOf(id));
    return r.lines.slice(0, 3).map(function (e) { return m.strings[e[0]] + ' (' + C.percent(e[1], r.sum) + ')'; });
  };

  Flame.prototype.describe = function (id) {
    var f = this.forest, vt = this.vt, m = f.m, fr = vt.frame(id), out = [PV.frameName(m, fr)];
    var dso = PV.frameDso(m, fr);
    if (dso) out.push(dso + ' (' + PV.frameKind(m, fr) + ')');
    var text = C.groupDigits(vt.samples(id)) + ' samples';
    if (f.ev.weight === 'period') text += ', ' + C.groupDigits(Math.round(vt.total(id))) + ' ns';
    text += ', ' + C.percent(vt.total(id), vt.total(0)) + ' of selection';
    if (this.zoom) text += ', ' + C.percent(vt.total(id), vt.total(this.zoom)) + ' of zoomed frame';
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
      if (self.onPick) self.onPick(self.vt.frame(id));
    });
  };
})();
