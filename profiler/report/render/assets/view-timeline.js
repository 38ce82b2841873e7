// The timeline: a time axis, one track per thread (or per CPU) with its sample density,
// off-CPU intervals (from the 'offcpu' event when the capture has one) and markers (exec, fork,
// exit, lost, throttle), and a FlameScope-style heat map: columns of equal time, each cut
// into 50 sub-second buckets coloured by their samples. Drag on either to select a range.
(function () {
  'use strict';
  var PV = window.PV, C = window.FlameCommon;

  var LABEL = 170, TRACK = 16, AXIS = 18, ROWS = 50, CELL_H = 3, MIN_CELL_W = 6;
  var NICE = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];
  var MARK_COLORS = { exec: '#1a9e3a', fork: '#e08a00', exit: '#777', lost: '#d11', throttle: '#8a2be2',
                      unthrottle: '#b58ee0', note: '#333' };

  function Timeline(m, els, onSelect) {
    this.m = m; this.tracksCanvas = els.tracks; this.heatCanvas = els.heat; this.info = els.info;
    this.trackSel = els.trackSel; this.heatSel = els.heatSel;  // the selection, drawn over the two
    this.onSelect = onSelect; this.range = null; this.drag = null;
    this.event = 0; this.threadOn = null; this.byCpu = false;
    this.offcpu = -1;
    for (var e = 0; e < m.events.length; e++) if (m.events[e].name === 'offcpu') this.offcpu = e;
    this.bind();
  }
  PV.Timeline = Timeline;

  Timeline.prototype.setState = function (event, threadOn, byCpu, range) {
    this.event = event; this.threadOn = threadOn; this.byCpu = byCpu; this.range = range;
    var key = event + '|' + byCpu;
    if (!this.trackCache || this.trackCache.key !== key) this.trackCache = { key: key, tracks: this.trackList() };
    this.tracks = this.trackCache.tracks;
    this.draw();
  };

  // The tracks: the threads (of every event) in order of first sample, or the CPUs.
  Timeline.prototype.trackList = function () {
    var m = this.m, ev = m.events[this.event], seen = new Map(), list = [];
    var key = this.byCpu ? ev.cpu : ev.thread;
    for (var i = 0; i < key.length; i++) {
      if (!seen.has(key[i])) { seen.set(key[i], list.length); list.push(key[i]); }
    }
    if (this.byCpu) list.sort(function (a, b) { return a - b; });
    return list;
  };

  Timeline.prototype.width = function () { return Math.max(LABEL + 50, this.tracksCanvas.clientWidth); };
  Timeline.prototype.xOf = function (t) {
    var w = this.width() - LABEL;
    return LABEL + (this.m.endNs > 0 ? t / this.m.endNs * w : 0);
  };
  Timeline.prototype.timeAt = function (x) {
    var w = this.width() - LABEL;
    return Math.max(0, Math.min(this.m.endNs, (x - LABEL) / w * this.m.endNs));
  };

  // A canvas of width x height CSS pixels, cleared; its backing store is only re-made when the
  // size changes (a selection redraws the same canvases many times).
  function setup(canvas, width, height) {
    var ratio = window.devicePixelRatio || 1, w = Math.round(width * ratio), h = Math.round(height * ratio);
    canvas.style.height = height + 'px';
    if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
    var ctx = canvas.getContext('2d');
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    ctx.font = C.FONT;
    ctx.textBaseline = 'middle';
    return ctx;
  }

  Timeline.prototype.draw = function () {
    this.drawTracks();
    this.drawHeat();
    this.describe();
  };

  // What the tracks show depends on the event, the threads shown, the layout and the width,
  // not on the selection: it is drawn again only when one of those changes; the selection is
  // a box over it (#pv-tracks-sel).
  Timeline.prototype.imageKey = function () {
    return [this.event, this.byCpu, this.width(), window.devicePixelRatio || 1,
            this.threadOn ? Array.prototype.join.call(this.threadOn, '') : ''].join('|');
  };

  Timeline.prototype.drawTracks = function () {
    var width = this.width(), height = AXIS + this.tracks.length * TRACK, key = this.imageKey();
    if (this.drawnKey !== key) {
      this.renderTracks(setup(this.tracksCanvas, width, height), width);
      this.drawnKey = key;
    }
    this.drawSelection(height);
  };

  Timeline.prototype.renderTracks = function (ctx, width) {
    var m = this.m, ev = m.events[this.event], cols = width - LABEL;
    var tracks = this.tracks, index = new Map(), trackOf = new Int32Array(this.byCpu ? 65536 : m.threads.length);
    tracks.forEach(function (t, k) { index.set(t, k); trackOf[t] = k; });
    // density: weight per pixel column per track
    var acc = new Float64Array(tracks.length * cols), max = new Float64Array(tracks.length);
    var key = this.byCpu ? ev.cpu : ev.thread, scale = m.endNs > 0 ? cols / m.endNs : 0;
    var byPeriod = ev.weight === 'period', count = ev.count;
    for (var i = 0; i < ev.time.length; i++) {
      var k = trackOf[key[i]], x = Math.min(cols - 1, Math.floor(ev.time[i] * scale));
      var v = (acc[k * cols + x] += byPeriod ? ev.period[i] : count ? count[i] : 1);
      if (v > max[k]) max[k] = v;
    }
    this.drawAxis(ctx, width);
    for (var t = 0; t < tracks.length; t++) {
      var y = AXIS + t * TRACK, on = this.byCpu || !this.threadOn || this.threadOn[tracks[t]];
      ctx.fillStyle = t % 2 ? '#f4f4f6' : '#fff';
      ctx.fillRect(0, y, width, TRACK);
      ctx.fillStyle = on ? '#222' : '#aaa';
      var label = this.byCpu ? 'CPU ' + tracks[t] : PV.threadLabel(m, tracks[t]);
      ctx.fillText(label.length > 22 ? label.slice(0, 21) + '…' : label, 4, y + TRACK / 2);
      ctx.fillStyle = on ? 'hsl(18, 80%, 52%)' : '#ccc';
      for (var c = 0; c < cols; c++) {
        var a = acc[t * cols + c];
        if (a > 0) {
          var h = Math.max(1, (TRACK - 3) * a / max[t]);
          ctx.fillRect(LABEL + c, y + TRACK - 1 - h, 1, h);
        }
      }
    }
    this.untrackedMarkers = 0;
    if (!this.byCpu) { this.drawOffCpu(ctx, index); this.drawMarkers(ctx, index); }
  };

  Timeline.prototype.drawAxis = function (ctx, width) {
    var span = this.m.endNs / 1e9, step = niceStep(span / Math.max(1, (width - LABEL) / 90));
    ctx.fillStyle = '#555';
    ctx.fillText('time (s)', 4, AXIS / 2);
    for (var s = 0; s <= span + 1e-12; s += step) {
      var x = this.xOf(s * 1e9);
      ctx.fillRect(x, AXIS - 5, 1, 5);
      ctx.fillText(s.toFixed(step < 0.01 ? 3 : step < 1 ? 2 : 0), x + 2, AXIS / 2 - 1);
    }
  };

  function niceStep(raw) {
    for (var k = 0; k < NICE.length; k++) if (NICE[k] >= raw) return NICE[k];
    return NICE[NICE.length - 1];
  }

  // Off-CPU intervals (the 'offcpu' event's rows: switch-out time, period = the wait in ns).
  Timeline.prototype.drawOffCpu = function (ctx, index) {
    if (this.offcpu < 0) return;
    var ev = this.m.events[this.offcpu];
    ctx.fillStyle = 'hsla(234, 72%, 60%, 0.45)';
    for (var i = 0; i < ev.time.length; i++) {
      var k = index.get(ev.thread[i]);
      if (k === undefined) continue;
      var x0 = this.xOf(ev.time[i]), x1 = this.xOf(ev.time[i] + ev.period[i]);
      ctx.fillRect(x0, AXIS + k * TRACK + 2, Math.max(1, x1 - x0), 4);
    }
  };

  Timeline.prototype.drawMarkers = function (ctx, index) {
    var marks = this.m.doc.markers, untracked = 0;
    for (var j = 0; j < marks.length; j++) {
      var mk = marks[j], k = mk[2] >= 0 ? index.get(mk[2]) : -1;
      if (mk[0] === 'note') continue;
      if (k === undefined) { untracked++; continue; }
      var x = this.xOf(mk[1]), y = k < 0 ? AXIS - 6 : AXIS + k * TRACK;
      ctx.fillStyle = MARK_COLORS[mk[0]] || '#333';
      ctx.beginPath();
      ctx.moveTo(x - 3, y); ctx.lineTo(x + 3, y); ctx.lineTo(x, y + 6); ctx.fill();
    }
    this.untrackedMarkers = untracked;  // on threads without samples of this event: said below the heat map
  };

  Timeline.prototype.drawSelection = function (height) {
    var r = this.drag ? [Math.min(this.drag[0], this.drag[1]), Math.max(this.drag[0], this.drag[1])] : this.range;
    var box = this.trackSel;
    box.hidden = !r;
    if (!r) return;
    var x0 = this.xOf(r[0]), x1 = this.xOf(r[1]);
    box.style.left = x0 + 'px';
    box.style.width = Math.max(2, x1 - x0 + 1) + 'px';
    box.style.height = height + 'px';
  };

  // --- the heat map ----------------------------------------------------------------------
  Timeline.prototype.heatLayout = function () {
    var cols = Math.max(1, Math.floor((this.width() - LABEL) / MIN_CELL_W));
    var column = niceStep(this.m.endNs / 1e9 / cols) * 1e9;
    return { column: column, cols: Math.max(1, Math.ceil((this.m.endNs + 1) / column)), cell: column / ROWS };
  };

  // The heat map: its cells drawn again only when the event, the threads or the width change;
  // the selection is drawn on a canvas over it, one rectangle per column it covers.
  Timeline.prototype.drawHeat = function () {
    var L = this.heatLayout(), width = this.width(), height = ROWS * CELL_H + 14, key = this.imageKey();
    var cw = (width - LABEL) / L.cols;
    if (this.heatKey !== key) {
      this.renderHeat(setup(this.heatCanvas, width, height), L, cw);
      this.heatKey = key;
    }
    var ctx = setup(this.heatSel, width, height), sel = this.range;
    this.heatCanvas.style.width = this.heatSel.style.width = width + 'px';
    if (sel) {
      ctx.fillStyle = 'rgba(40, 90, 220, 0.28)';
      var c0 = Math.floor(sel[0] / L.column), c1 = Math.min(L.cols - 1, Math.floor(sel[1] / L.column));
      for (var c = c0; c <= c1; c++) {
        var r0 = c === c0 ? Math.floor((sel[0] - c * L.column) / L.cell) : 0;
        var r1 = c === c1 ? Math.min(ROWS - 1, Math.floor((sel[1] - c * L.column) / L.cell)) : ROWS - 1;
        ctx.fillRect(LABEL + c * cw, r0 * CELL_H, Math.max(1, cw - 1), (r1 - r0 + 1) * CELL_H);
      }
    }
    this.heat = { layout: L, cw: cw };
  };

  Timeline.prototype.renderHeat = function (ctx, L, cw) {
    var ev = this.m.events[this.event], counts = new Float64Array(L.cols * ROWS), max = 0, on = this.threadOn, c, r;
    for (var i = 0; i < ev.time.length; i++) {
      if (on && !on[ev.thread[i]]) continue;
      c = Math.floor(ev.time[i] / L.column);
      r = Math.min(ROWS - 1, Math.floor((ev.time[i] - c * L.column) / L.cell));
      var v = (counts[c * ROWS + r] += PV.rowWeight(ev, i));
      if (v > max) max = v;
    }
    ctx.fillStyle = '#555';
    ctx.fillText('heat map', 4, 8);
    ctx.fillText('column ' + fmtSeconds(L.column / 1e9), 4, 24);
    ctx.fillText('row ' + fmtSeconds(L.cell / 1e9), 4, 40);
    for (c = 0; c < L.cols; c++) {
      for (r = 0; r < ROWS; r++) {
        var n = counts[c * ROWS + r], f = max > 0 ? n / max : 0;
        if (n <= 0) continue;
        ctx.fillStyle = 'hsl(' + (40 - 40 * f).toFixed(0) + ', 90%, ' + (92 - 47 * f).toFixed(0) + '%)';
        ctx.fillRect(LABEL + c * cw, r * CELL_H, Math.max(1, cw - 1), CELL_H - 0.5);
      }
    }
  };

  function fmtSeconds(s) {
    return s >= 1 ? s.toFixed(s % 1 ? 1 : 0) + ' s' : s >= 1e-3 ? (s * 1e3).toPrecision(3) + ' ms' : (s * 1e6).toPrecision(3) + ' µs';
  }
  PV.fmtSeconds = fmtSeconds;

  // The selection in report --time's form: perf's absolute seconds, as script prints them.
  PV.reportTime = function (m, range) {
    var s = m.doc.start_ns;
    return ((s + range[0]) / 1e9).toFixed(9) + ',' + ((s + range[1]) / 1e9).toFixed(9);
  };

  // The cell under a point: [start, end] of its time bucket, or null.
  Timeline.prototype.cellAt = function (x, y) {
    var L = this.heat.layout, c = Math.floor((x - LABEL) / this.heat.cw), r = Math.floor(y / CELL_H);
    if (c < 0 || c >= L.cols || r < 0 || r >= ROWS) return null;
    var t0 = c * L.column + r * L.cell;
    return [t0, t0 + L.cell - 1];
  };

  Timeline.prototype.describe = function () {
    var m = this.m, ev = m.events[this.event], text = '';
    if (this.range) {
      text = 'selected ' + (this.range[0] / 1e9).toFixed(6) + ' s – ' + (this.range[1] / 1e9).toFixed(6) +
             ' s (' + fmtSeconds((this.range[1] - this.range[0]) / 1e9) + ') · as report --time ' +
             PV.reportTime(m, this.range) + ' · Esc clears · ←/→ move';
    } else {
      text = 'whole capture (' + fmtSeconds(m.endNs / 1e9) + '): drag on the tracks or the heat map to select a range';
    }
    if (ev.bucketNs > 0) {
      text += ' · detail reduced: ' + C.groupDigits(ev.samples) + ' samples kept in ' + C.groupDigits(ev.rows) +
              ' rows, times rounded down to ' + fmtSeconds(ev.bucketNs / 1e9) + ' buckets (--max-rows)';
    }
    this.info.textContent = text;
  };

  Timeline.prototype.bind = function () {
    var self = this;
    function localX(canvas, ev) { return ev.clientX - canvas.getBoundingClientRect().left; }
    function localY(canvas, ev) { return ev.clientY - canvas.getBoundingClientRect().top; }
    this.tracksCanvas.addEventListener('mousedown', function (ev) {
      var x = localX(self.tracksCanvas, ev);
      if (x < LABEL) {
        var k = Math.floor((localY(self.tracksCanvas, ev) - AXIS) / TRACK);
        if (k >= 0 && k < self.tracks.length && self.onTrackClick) self.onTrackClick(self.tracks[k], ev);
        return;
      }
      var t = self.timeAt(x);
      self.drag = [t, t];
      ev.preventDefault();
    });
    this.heatCanvas.addEventListener('mousedown', function (ev) {
      var cell = self.cellAt(localX(self.heatCanvas, ev), localY(self.heatCanvas, ev));
      if (!cell) return;
      self.heatDrag = [cell, cell];
      ev.preventDefault();
    });
    window.addEventListener('mousemove', function (ev) {
      if (self.drag) {
        self.drag[1] = self.timeAt(localX(self.tracksCanvas, ev));
        self.drawTracks();
      } else if (self.heatDrag) {
        var cell = self.cellAt(localX(self.heatCanvas, ev), localY(self.heatCanvas, ev));
        if (cell) self.heatDrag[1] = cell;
      }
    });
    window.addEventListener('mouseup', function () {
      var r = null;
      if (self.drag) {
        var a = Math.min(self.drag[0], self.drag[1]), b = Math.max(self.drag[0], self.drag[1]);
        self.drag = null;
        r = b - a >= 1 ? [Math.floor(a), Math.ceil(b)] : null;
        self.onSelect(r);
      } else if (self.heatDrag) {
        var d = self.heatDrag;
        self.heatDrag = null;
        self.onSelect([Math.min(d[0][0], d[1][0]), Math.max(d[0][1], d[1][1])]);
      }
    });
  };
})();
