// Interactive flame graph drawn on a canvas from the JSON in #fg-data.
// Data: strings[], frames[] (flat name/dso/kind triples), kinds[], and per node in preorder
// f (frame), d (depth), v (weight incl. descendants), optional s (samples when v is period),
// optional l: per wide node with source lines [node, line string, weight, line string, weight, ...],
// optional fl: per frame, its lines over all its nodes [frame, total weight, line string, weight, ...].
// A differential flame graph (meta.diff) adds diff.o and diff.os: per node the other side's weight and
// samples (V and S are the drawn side's: NEW's, or BASE's when meta.diff.negate); frames are coloured
// by NEW's share minus BASE's share (each of its own total), red more, blue less.
(function () {
  'use strict';

  var ROW = 18;          // row height in CSS pixels
  var MIN_PX = 0.35;     // narrower frames (and their subtrees) are not drawn
  var C = window.FlameCommon;  // flamecommon.js: colours, formatting, search
  var FONT = C.FONT;
  var MATCH_COLOR = C.MATCH_COLOR;

  var data = JSON.parse(document.getElementById('fg-data').textContent);
  var meta = data.meta, strings = data.strings, kinds = data.kinds, frames = data.frames;
  var F = data.f, D = data.d, V = data.v, S = data.s || data.v;
  var N = F.length;
  var sourceLines = {};  // node -> [string index, weight, ...], heaviest first
  (data.l || []).forEach(function (row) { sourceLines[row[0]] = row.slice(1); });
  var frameLines = {};   // frame -> [total weight, string index, weight, ...]
  (data.fl || []).forEach(function (row) { frameLines[row[0]] = row.slice(1); });
  var diff = meta.diff || null;
  var baseV = null, newV = null, baseS = null, newS = null;
  if (diff) {
    baseV = diff.negate ? V : data.diff.o; newV = diff.negate ? data.diff.o : V;
    baseS = diff.negate ? S : data.diff.os; newS = diff.negate ? data.diff.os : S;
  }
  // NEW's share minus BASE's share of node i, in percentage points.
  function change(i) {
    var b = diff.base_total > 0 ? 100 * baseV[i] / diff.base_total : 0;
    var n = diff.new_total > 0 ? 100 * newV[i] / diff.new_total : 0;
    return n - b;
  }

  // Layout in weight units: start[i] is the node's left edge; the subtree of i is i..end[i]-1.
  var parent = new Int32Array(N), start = new Float64Array(N), end = new Int32Array(N);
  var maxDepth = 0;
  (function layout() {
    var lastAt = [], cursor = new Float64Array(N);
    for (var i = 0; i < N; i++) {
      var d = D[i];
      if (d > maxDepth) maxDepth = d;
      if (d === 0) {
        parent[i] = -1;
        start[i] = 0;
      } else {
        var p = lastAt[d - 1];
        parent[i] = p;
        start[i] = cursor[p];
        cursor[p] += V[i];
      }
      cursor[i] = start[i];
      lastAt[d] = i;
      end[i] = i + 1;
    }
    for (var j = N - 1; j > 0; j--) {
      if (end[j] > end[parent[j]]) end[parent[j]] = end[j];
    }
  })();

  function nameOf(i) { return strings[frames[3 * F[i]]]; }
  function dsoOf(i) { return strings[frames[3 * F[i] + 1]]; }
  function kindOf(i) { return kinds[frames[3 * F[i] + 2]]; }

  // The thread state a node lies under (the offcpu and wall events' root frames, docs/offcpu.md):
  // 'blocked' or 'runnable' for the frames of an off-CPU stack, '' on a CPU or without states.
  var waitOf = new Array(N);
  for (var w = 0; w < N; w++) {
    var inherited = parent[w] >= 0 ? waitOf[parent[w]] : '';
    if (kindOf(w) === 'state') {
      var label = nameOf(w);
      inherited = C.waitOfLabel(label);
    }
    waitOf[w] = inherited;
  }

  var colorCache = {};
  function frameColor(i) {
    if (diff) return diffColor(change(i));
    var fi = F[i], wait = waitOf[i];
    var c = colorCache[wait + fi];
    if (c) return c;
    c = C.kindColor(kindOf(i), nameOf(i), wait);
    colorCache[wait + fi] = c;
    return c;
  }
  // Light grey for no change to red (more) or blue (less), saturated by the change's size against
  // the largest one (the legend's scale).
  function diffColor(pp) {
    var t = diff.scale > 0 ? Math.min(1, Math.abs(pp) / diff.scale) : 0;
    var fade = Math.round(235 - 180 * t);
    if (pp > 0) return 'rgb(255, ' + fade + ', ' + fade + ')';
    if (pp < 0) return 'rgb(' + fade + ', ' + fade + ', 255)';
    return 'rgb(235, 235, 235)';
  }
  var groupDigits = C.groupDigits, percent = C.percent;

  var canvas = document.getElementById('fg-canvas');
  var ctx = canvas.getContext('2d');
  var tooltip = document.getElementById('fg-tooltip');
  var details = document.getElementById('fg-details');
  var resetButton = document.getElementById('fg-reset');
  var invertBox = document.getElementById('fg-invert');
  var searchBox = document.getElementById('fg-search');
  var regexBox = document.getElementById('fg-regex');
  var caseBox = document.getElementById('fg-case');
  var hiddenLabel = document.getElementById('fg-hidden');
  var matchedLabel = document.getElementById('fg-matched');
  var defaultDetails = details.textContent;

  var state = { zoom: 0, inverted: false, matched: null, matchedValue: 0, hidden: 0 };
  // What the last draw put on screen (CSS pixels), for hit testing and for tests.
  var drawnNode = [], drawnX = [], drawnY = [], drawnW = [], drawnDim = [];
  var charWidth = 7;

  function rowY(depth) { return state.inverted ? depth * ROW : (maxDepth - depth) * ROW; }

  function draw() {
    var width = Math.max(1, canvas.clientWidth);
    var height = (maxDepth + 1) * ROW;
    var ratio = window.devicePixelRatio || 1;
    canvas.style.height = height + 'px';
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    ctx.font = FONT;
    ctx.textBaseline = 'middle';
    charWidth = ctx.measureText('MMMMMMMMMM').width / 10 || 7;
    drawnNode = []; drawnX = []; drawnY = []; drawnW = []; drawnDim = [];

    var z = state.zoom, scale = V[z] > 0 ? width / V[z] : 0, origin = start[z];
    var hidden = 0;
    for (var a = parent[z]; a >= 0; a = parent[a]) drawFrame(a, 0, width, true);
    for (var i = z; i < end[z];) {
      var w = V[i] * scale;
      if (w < MIN_PX) { hidden += end[i] - i; i = end[i]; continue; }
      drawFrame(i, (start[i] - origin) * scale, w, false);
      i++;
    }
    state.hidden = hidden;
    updateHiddenLabel();
  }

  // Say what is not on screen: frames too narrow at this zoom (click to zoom in and they
  // are drawn: the file holds the whole tree), and frames left out of the file (--min-width).
  function updateHiddenLabel() {
    var parts = [];
    if (state.hidden > 0) {
      parts.push(groupDigits(state.hidden) + ' frame' + (state.hidden === 1 ? '' : 's') +
                 ' too narrow to draw at this zoom (click a frame to zoom in)');
    }
    if (meta.pruned > 0) {
      parts.push(groupDigits(meta.pruned) + ' frame' + (meta.pruned === 1 ? '' : 's') + ' narrower than ' +
                 (100 * meta.min_width).toPrecision(2) + '% of the total left out of this file (--min-width)');
    }
    hiddenLabel.textContent = parts.join('; ');
    hiddenLabel.hidden = parts.length === 0;
  }

  // The widest frames are at the bottom of a flame graph: with deep stacks, open (and zoom)
  // with the zoomed frame's row in view rather than the empty top of the canvas.
  function scrollToData() {
    var box = canvas.getBoundingClientRect();
    var rowTop = box.top + rowY(D[state.zoom]);
    var bottom = window.innerHeight - details.offsetHeight;  // the sticky footer covers the rest
    if (rowTop + ROW > bottom || rowTop < 0) {
      window.scrollTo(0, Math.max(0, window.scrollY + rowTop + ROW - bottom + 8));
    }
  }

  function drawFrame(i, x, w, dim) {
    var y = rowY(D[i]);
    ctx.globalAlpha = dim ? 0.5 : 1;
    ctx.fillStyle = state.matched && state.matched[i] ? MATCH_COLOR : frameColor(i);
    ctx.fillRect(x, y, Math.max(w - 0.5, 0.35), ROW - 1);
    var room = Math.floor((w - 6) / charWidth);
    if (room >= 3) {
      var name = nameOf(i);
      var label = name.length <= room ? name : name.slice(0, room - 2) + '..';
      ctx.fillStyle = '#000';
      ctx.fillText(label, x + 3, y + ROW / 2);
    }
    ctx.globalAlpha = 1;
    drawnNode.push(i); drawnX.push(x); drawnY.push(y); drawnW.push(w); drawnDim.push(dim);
  }

  function hit(clientX, clientY) {
    var box = canvas.getBoundingClientRect();
    var x = clientX - box.left, y = clientY - box.top;
    for (var k = drawnNode.length - 1; k >= 0; k--) {
      if (y >= drawnY[k] && y < drawnY[k] + ROW && x >= drawnX[k] && x < drawnX[k] + drawnW[k]) {
        return drawnNode[k];
      }
    }
    return -1;
  }

  function side(label, samples, value, total) {
    var text = label + ': ' + groupDigits(samples) + ' samples';
    if (meta.weight !== 'samples') text += ', ' + groupDigits(value) + ' ' + meta.unit;
    return text + ' (' + percent(value, total) + ')';
  }

  function describeDiff(i, lines) {
    var pp = change(i);
    lines.push(side('BASE', baseS[i], baseV[i], diff.base_total) + ' · ' +
               side('NEW', newS[i], newV[i], diff.new_total));
    lines.push('change: ' + (pp > 0 ? '+' : pp < 0 ? '−' : '±') + Math.abs(pp).toFixed(2) +
               ' pp of share, ' + (newS[i] - baseS[i] >= 0 ? '+' : '−') +
               groupDigits(Math.abs(newS[i] - baseS[i])) + ' samples');
    if (state.zoom !== 0) lines.push(percent(V[i], V[state.zoom]) + ' of zoomed frame');
    return withSource(i, lines, ' (' + (diff.negate ? 'BASE' : 'NEW') + ')');
  }

  // The node's hottest source lines (of the drawn side in a differential graph), or, for a
  // narrow node, its function's lines over the whole graph.
  function withSource(i, lines, whose) {
    var src = sourceLines[i], whole = V[i], label = 'source' + whose + ': ';
    if (!src && frameLines[F[i]]) {
      src = frameLines[F[i]].slice(1);
      whole = frameLines[F[i]][0];
      label = 'source' + whose + ' (all its calls): ';
    }
    if (src) {
      var where = [];
      for (var k = 0; k < src.length; k += 2) where.push(strings[src[k]] + ' (' + percent(src[k + 1], whole) + ')');
      lines.push(label + where.join(', '));
    }
    return lines;
  }

  function describe(i) {
    var total = V[0], lines = [nameOf(i)];
    var dso = dsoOf(i), kind = kindOf(i);
    if (dso) lines.push(dso + ' (' + kind + ')');
    if (diff) return describeDiff(i, lines);
    var text = groupDigits(S[i]) + ' samples';
    if (meta.weight === 'samples') {
      text += ', ' + percent(V[i], total) + ' of total';
    } else {
      text += ', ' + groupDigits(V[i]) + ' ' + meta.unit + ', ' + percent(V[i], total) + ' of total';
    }
    if (state.zoom !== 0) text += ', ' + percent(V[i], V[state.zoom]) + ' of zoomed frame';
    lines.push(text);
    return withSource(i, lines, '');
  }

  function showDetails(i, clientX, clientY) {
    if (i < 0) {
      tooltip.hidden = true;
      details.textContent = defaultDetails;
      return;
    }
    var lines = describe(i);
    details.textContent = lines.join(' \u2014 ');
    tooltip.textContent = lines.join('\n');
    tooltip.hidden = false;
    var host = tooltip.parentElement.getBoundingClientRect();
    var left = clientX - host.left + 14, top = clientY - host.top + 14;
    if (left + tooltip.offsetWidth > host.width) left = Math.max(0, clientX - host.left - tooltip.offsetWidth - 14);
    tooltip.style.left = left + 'px';
    tooltip.style.top = top + 'px';
  }

  var lastMouse = null;  // the pointer over the canvas, to refresh details after a redraw

  function zoomTo(i) {
    state.zoom = i;
    resetButton.disabled = i === 0;
    updateMatchedLabel();
    draw();
    scrollToData();
    if (lastMouse) showDetails(hit(lastMouse[0], lastMouse[1]), lastMouse[0], lastMouse[1]);
  }

  // Matches a frame's name or its DSO; case-insensitive unless "Match case" is checked.
  function compileSearch() {
    searchBox.classList.remove('invalid');
    var matcher = C.compileSearch(searchBox.value, regexBox.checked, caseBox.checked);
    if (matcher === undefined) searchBox.classList.add('invalid');
    return matcher;
  }

  // Sum of matched weight under node `top`, each sample once: a match's subtree is skipped.
  function matchedWeight(top) {
    var sum = 0;
    for (var i = top; i < end[top];) {
      if (state.matched[i]) { sum += V[i]; i = end[i]; } else i++;
    }
    return sum;
  }

  function search() {
    var matcher = compileSearch();
    if (!matcher) {
      state.matched = null;
      matchedLabel.textContent = matcher === undefined ? 'invalid regular expression' : '';
      draw();
      return;
    }
    var matched = new Uint8Array(N);
    for (var i = 0; i < N; i++) {
      if (kindOf(i) !== 'root' && (matcher.test(nameOf(i)) || matcher.test(dsoOf(i)))) matched[i] = 1;
    }
    state.matched = matched;
    updateMatchedLabel();
    draw();
  }

  function updateMatchedLabel() {
    if (!state.matched) return;
    state.matchedValue = matchedWeight(0);
    var text = 'Matched: ' + percent(state.matchedValue, V[0]) + ' of total';
    if (state.zoom !== 0) text += ' (' + percent(matchedWeight(state.zoom), V[state.zoom]) + ' of zoomed frame)';
    matchedLabel.textContent = text;
  }

  canvas.addEventListener('mousemove', function (ev) {
    lastMouse = [ev.clientX, ev.clientY];
    var i = hit(ev.clientX, ev.clientY);
    showDetails(i, ev.clientX, ev.clientY);
  });
  canvas.addEventListener('mouseleave', function () {
    lastMouse = null;
    showDetails(-1, 0, 0);
  });
  canvas.addEventListener('click', function (ev) {
    var i = hit(ev.clientX, ev.clientY);
    if (i >= 0) zoomTo(i);
  });
  resetButton.addEventListener('click', function () { zoomTo(0); });
  invertBox.addEventListener('change', function () { state.inverted = invertBox.checked; draw(); });
  searchBox.addEventListener('input', search);
  regexBox.addEventListener('change', search);
  caseBox.addEventListener('change', search);
  document.addEventListener('keydown', function (ev) {
    if (ev.key === 'Escape') zoomTo(0);
  });
  var pending = false;
  window.addEventListener('resize', function () {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () { pending = false; draw(); });
  });

  // A read-only view for tests and benchmarks.
  window.flamegraph = {
    meta: meta,
    drawn: function () {
      var out = [];
      for (var k = 0; k < drawnNode.length; k++) {
        var i = drawnNode[k];
        out.push({ node: i, name: nameOf(i), dso: dsoOf(i), kind: kindOf(i), depth: D[i],
                   value: V[i], samples: S[i], x: drawnX[k], y: drawnY[k], w: drawnW[k], h: ROW - 1,
                   dimmed: drawnDim[k], matched: !!(state.matched && state.matched[i]),
                   color: state.matched && state.matched[i] ? MATCH_COLOR : frameColor(i),
                   change: diff ? change(i) : null,
                   base: diff ? baseS[i] : null, new: diff ? newS[i] : null });
      }
      return out;
    },
    zoom: function () { return state.zoom; },
    inverted: function () { return state.inverted; },
    matchedValue: function () { return state.matched ? state.matchedValue : 0; },
    hidden: function () { return state.hidden; },
    nodes: function () { return N; },
    total: function () { return V[0]; },
    drawnMs: -1,
    firstPaintMs: -1
  };

  draw();
  scrollToData();
  window.flamegraph.drawnMs = performance.now();
  document.documentElement.setAttribute('data-fg-ready', '1');
  // the frame after the first draw has been painted once the next animation frame starts
  window.requestAnimationFrame(function () {
    window.requestAnimationFrame(function () { window.flamegraph.firstPaintMs = performance.now(); });
  });
})();
