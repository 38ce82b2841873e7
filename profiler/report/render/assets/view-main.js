// The view page's state and wiring: which event, time range, threads, merge mode, tab, picked
// function and search; kept in the URL hash (#e=0&t=START,END&m=1&tab=tree&fn=NAME&q=TEXT) so a
// view can be shared as a link to the file. Every change re-renders what depends on it; the
// trees are weighed once per change and the tabs not shown are rendered when opened.
(function () {
  'use strict';
  var PV = window.PV, C = window.FlameCommon;
  var $ = function (id) { return document.getElementById(id); };
  var TABS = ['tree', 'bottom', 'sandwich', 'source'];

  var state = { event: 0, range: null, merge: false, byCpu: false, threads: '', tab: 'tree', fn: '', q: '',
                regex: false, exact: false, inverted: false, off: new Set() };
  var m, timeline, flame, tables = {}, forests = new Map(), forest;
  var api = window.view = { ready: false, lastRenderMs: -1, firstPaintMs: -1, loadMs: -1 };

  function readHash() {
    var h = location.hash.replace(/^#/, '');
    h.split('&').forEach(function (part) {
      var eq = part.indexOf('='), k = part.slice(0, eq), v = decodeURIComponent(part.slice(eq + 1));
      if (eq < 0) return;
      if (k === 'e') state.event = Math.max(0, Math.min(m.events.length - 1, +v || 0));
      else if (k === 't') { var r = v.split(',').map(Number); if (r.length === 2 && r[1] >= r[0]) state.range = [r[0] * 1e9, r[1] * 1e9]; }
      else if (k === 'm') state.merge = v === '1';
      else if (k === 'cpu') state.byCpu = v === '1';
      else if (k === 'tab' && TABS.indexOf(v) >= 0) state.tab = v;
      else if (k === 'fn') state.fn = v;
      else if (k === 'q') state.q = v;
      else if (k === 'th') state.threads = v;
    });
  }

  function writeHash() {
    var parts = ['e=' + state.event];
    if (state.range) parts.push('t=' + (state.range[0] / 1e9).toFixed(9) + ',' + (state.range[1] / 1e9).toFixed(9));
    if (state.merge) parts.push('m=1');
    if (state.byCpu) parts.push('cpu=1');
    if (state.tab !== 'tree') parts.push('tab=' + state.tab);
    if (state.fn) parts.push('fn=' + encodeURIComponent(state.fn));
    if (state.q) parts.push('q=' + encodeURIComponent(state.q));
    if (state.threads) parts.push('th=' + encodeURIComponent(state.threads));
    try { history.replaceState(null, '', '#' + parts.join('&')); } catch (e) { /* some file:// hosts refuse */ }
  }

  // The threads shown: the filter box (a regex on "comm pid/tid") and the tracks switched off.
  function threadOn() {
    if (!state.threads && !state.off.size) return null;
    var on = new Uint8Array(m.threads.length), re = null;
    try { re = state.threads ? new RegExp(state.threads, 'i') : null; $('pv-threads').classList.remove('invalid'); }
    catch (e) { $('pv-threads').classList.add('invalid'); }
    for (var t = 0; t < m.threads.length; t++) {
      var th = m.threads[t], text = (m.strings[th[2]] || '') + ' ' + th[0] + '/' + th[1];
      on[t] = (!re || re.test(text)) && !state.off.has(t) ? 1 : 0;
    }
    return on;
  }

  function frameByName(name) {
    if (!name) return -1;
    for (var f = 0; f < m.nFrames; f++) if (PV.frameName(m, f) === name) return f;
    return -1;
  }

  function currentForest() {
    var key = state.event + ':' + state.merge;
    if (!forests.has(key)) forests.set(key, new PV.Forest(m, state.event, state.merge));
    return forests.get(key);
  }

  // Everything that depends on the selection, the event, the threads or the merge mode.
  function update() {
    var t0 = performance.now(), on = threadOn(), t = [t0];
    forest = currentForest();
    forest.select(state.range, on);
    t.push(performance.now());
    flame.matcher = matcher();
    flame.inverted = state.inverted;
    flame.show(forest);
    t.push(performance.now());
    renderTab(on);
    t.push(performance.now());
    timeline.setState(state.event, on, state.byCpu, state.range);
    t.push(performance.now());
    updateMatched();
    updateHidden();
    writeHash();
    api.lastRenderMs = performance.now() - t0;
    // where the time went, for the benchmark: selection sums, flame graph, tab, timeline
    api.lastSplitMs = [t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3]];
  }

  function matcher() {
    var mt = C.compileSearch(state.q, state.regex, state.exact);
    $('pv-search').classList.toggle('invalid', mt === undefined);
    return mt || null;
  }

  function updateMatched() {
    $('pv-matched').textContent = flame.matcher ? 'Matched: ' +
      C.percent(forest.matchedWeight(flame.matcher), forest.top.total(0)) + ' of selection' : '';
  }

  function updateHidden() {
    var ev = m.events[state.event], notes = [];
    if (flame.hidden) notes.push(C.groupDigits(flame.hidden) + ' frames too narrow to draw (click a frame to zoom in)');
    $('pv-hidden').textContent = notes.join('; ');
    var fileNotes = [];
    if (!ev.hasCallchains) fileNotes.push('this event has no call chains (record with -g): its trees are one level deep');
    m.doc.markers.forEach(function (mk) { if (mk[0] === 'note') fileNotes.push(m.strings[mk[3]]); });
    if (timeline.untrackedMarkers) {
      fileNotes.push(C.groupDigits(timeline.untrackedMarkers) + ' markers (exec, fork, exit...) are on threads ' +
                     'without samples of this event: not drawn');
    }
    $('pv-notes').textContent = fileNotes.join(' · ');
  }

  function renderTab(on) {
    var ev = m.events[state.event], unit = ev.weight === 'period' ? 'ns' : 'samples', fn = frameByName(state.fn);
    TABS.forEach(function (t) { $('pv-tab-' + t).hidden = t !== state.tab; });
    document.querySelectorAll('#pv-tabs button').forEach(function (b) { b.classList.toggle('on', b.getAttribute('data-tab') === state.tab); });
    var mt = flame.matcher, key = state.event + ':' + state.merge, whole = forest.top.total(0);
    if (state.tab === 'tree') {
      tables.tree.matcher = mt; tables.tree.selectedFrame = fn;
      tables.tree.show({ m: m, vt: forest.top, whole: whole, unit: unit, key: key, label: 'Function (top-down)' });
    } else if (state.tab === 'bottom') {
      var b = forest.bottomUp(), tree = forest.bottom;
      tables.bottom.matcher = mt; tables.bottom.selectedFrame = fn;
      tables.bottom.show({ m: m, whole: whole, unit: unit, key: key, label: 'Function (bottom-up: self time, then callers)',
                           vt: PV.arrayView(m, tree, b.total, b.samples,
                                            function (id) { return tree.parent[id] === 0 ? b.total[id] : null; }) });
    } else if (state.tab === 'sandwich') {
      renderSandwich(fn, unit, mt);
    } else {
      api.sourceShares = PV.renderSource($('pv-tab-source'), m, ev, state.range, on, fn);
    }
  }

  function renderSandwich(fn, unit, mt) {
    if (fn < 0) {
      $('pv-sandwich-head').innerHTML = '<p class="note">Click a function in the flame graph or a call tree.</p>';
      $('pv-callers').innerHTML = $('pv-callees').innerHTML = '';
      api.sandwichData = null;
      return;
    }
    var s = forest.sandwich(fn), whole = forest.top.total(0), key = Math.random();  // fresh trees: fresh ids
    api.sandwichData = s;
    var total = s.calleeTotal[1] || 0;
    $('pv-sandwich-head').innerHTML = '<h3>' + PV.escapeHtml(PV.frameName(m, fn)) + '</h3><p>total ' + C.percent(total, whole) +
      ' (' + C.groupDigits(s.calleeSamples[1] || 0) + ' samples), self ' + C.percent(s.selfWeight, whole) + ' (' +
      C.groupDigits(s.selfSamples) + ' samples) of the selection</p>';
    tables.callers.matcher = tables.callees.matcher = mt;
    tables.callers.show({ m: m, whole: whole, unit: unit, key: key, label: 'Callers (who calls it)',
                          vt: PV.arrayView(m, s.callers, s.callerTotal, s.callerSamples, null) });
    tables.callees.show({ m: m, whole: whole, unit: unit, key: key, label: 'Callees (what it calls)',
                          vt: PV.arrayView(m, s.callees, s.calleeTotal, s.calleeSamples, function (id) {
                            var own = s.calleeTotal[id];
                            s.callees.kids[id].forEach(function (k) { own -= s.calleeTotal[k]; });
                            return own;
                          }) });
  }

  function pick(frame) {
    if (frame < 0 || frame >= m.nFrames) return;
    state.fn = PV.frameName(m, frame);
    renderTab(threadOn());
    writeHash();
  }

  function select(range) {
    state.range = range;
    update();
  }

  function setTab(tab) { state.tab = tab; renderTab(threadOn()); writeHash(); }

  function bindControls() {
    var evSel = $('pv-event');
    m.events.forEach(function (e, k) {
      var o = document.createElement('option');
      o.value = k;
      o.textContent = e.name + ' (' + C.groupDigits(e.samples) + (e.weight === 'period' ? ' rows, by time)' : ' samples)');
      evSel.appendChild(o);
    });
    evSel.value = state.event;
    evSel.addEventListener('change', function () { state.event = +evSel.value; update(); });
    $('pv-merge').checked = state.merge;
    $('pv-merge').addEventListener('change', function () { state.merge = $('pv-merge').checked; update(); });
    $('pv-bycpu').checked = state.byCpu;
    $('pv-bycpu').addEventListener('change', function () { state.byCpu = $('pv-bycpu').checked; update(); });
    $('pv-threads').value = state.threads;
    $('pv-threads').addEventListener('input', function () { state.threads = $('pv-threads').value; update(); });
    $('pv-search').value = state.q;
    $('pv-search').addEventListener('input', function () { state.q = $('pv-search').value; update(); });
    $('pv-regex').addEventListener('change', function () { state.regex = $('pv-regex').checked; update(); });
    $('pv-case').addEventListener('change', function () { state.exact = $('pv-case').checked; update(); });
    $('pv-invert').addEventListener('change', function () { state.inverted = $('pv-invert').checked; flame.inverted = state.inverted; flame.draw(); });
    $('pv-reset').addEventListener('click', function () { flame.zoom = 0; flame.draw(); });
    document.querySelectorAll('#pv-tabs button').forEach(function (b) {
      b.addEventListener('click', function () { setTab(b.getAttribute('data-tab')); });
    });
    document.addEventListener('keydown', keys);
    var pending = false;
    window.addEventListener('resize', function () {
      if (pending) return;
      pending = true;
      requestAnimationFrame(function () { pending = false; flame.draw(); timeline.draw(); });
    });
  }

  function keys(ev) {
    var typing = /^(INPUT|SELECT|TEXTAREA)$/.test(ev.target.tagName);
    if (ev.key === 'Escape') { if (typing) ev.target.blur(); flame.zoom = 0; select(null); return; }
    if (typing) return;
    if (ev.key === '/') { ev.preventDefault(); $('pv-search').focus(); }
    else if (ev.key >= '1' && ev.key <= '4') setTab(TABS[+ev.key - 1]);
    else if (ev.key === 'm') { state.merge = !state.merge; $('pv-merge').checked = state.merge; update(); }
    else if (ev.key === 'i') { $('pv-invert').click(); }
    else if ((ev.key === 'ArrowLeft' || ev.key === 'ArrowRight') && state.range) {
      var w = state.range[1] - state.range[0], d = ev.key === 'ArrowLeft' ? -w : w;
      var a = Math.max(0, Math.min(m.endNs - w, state.range[0] + d));
      select([a, a + w]);
    }
  }

  // Track labels: click switches a thread off or on; shift-click shows it alone.
  function trackClick(thread, ev) {
    if (state.byCpu) return;
    if (ev.shiftKey) {
      state.off = new Set();
      for (var t = 0; t < m.threads.length; t++) if (t !== thread) state.off.add(t);
    } else if (state.off.has(thread)) state.off.delete(thread);
    else state.off.add(thread);
    update();
  }

  function start() {
    var t0 = performance.now();
    PV.load($('pv-data')).then(function (model) {
      m = model;
      api.loadMs = performance.now() - t0;
      readHash();
      flame = new PV.Flame($('pv-flame'), $('pv-tooltip'), $('pv-details'), pick);
      timeline = new PV.Timeline(m, { tracks: $('pv-tracks'), trackSel: $('pv-tracks-sel'), heat: $('pv-heat'),
                                      heatSel: $('pv-heat-sel'), info: $('pv-range') }, select);
      timeline.onTrackClick = trackClick;
      tables.tree = new PV.TreeTable($('pv-tab-tree'), pick);
      tables.bottom = new PV.TreeTable($('pv-tab-bottom'), pick);
      tables.callers = new PV.TreeTable($('pv-callers'), pick);
      tables.callees = new PV.TreeTable($('pv-callees'), pick);
      bindControls();
      update();
      exposeForTests();
      api.ready = true;
      document.documentElement.setAttribute('data-pv-ready', '1');
      requestAnimationFrame(function () { requestAnimationFrame(function () { api.firstPaintMs = performance.now(); }); });
    }).catch(function (err) {
      $('pv-range').textContent = 'This file could not be read: ' + err + ' (a browser with DecompressionStream is needed).';
      document.documentElement.setAttribute('data-pv-error', String(err));
    });
  }

  // A small API for tests and benchmarks (nothing in the page depends on it).
  function exposeForTests() {
    api.model = m;
    api.state = state;
    api.select = function (a, b) { select(a === null ? null : [a, b]); return api.lastRenderMs; };
    api.setEvent = function (name) {
      for (var k = 0; k < m.events.length; k++) if (m.events[k].name === name) { state.event = k; $('pv-event').value = k; }
      update();
    };
    api.setMerge = function (on) { state.merge = on; $('pv-merge').checked = on; update(); };
    api.setTab = setTab;
    api.pick = function (name) { pick(frameByName(name)); };
    api.flameTotal = function () { return { weight: forest.top.total(0), samples: forest.top.samples(0) }; };
    api.flameDrawn = function () {
      var vt = forest.top;
      return flame.drawn.map(function (d) {
        return { name: PV.frameName(m, vt.frame(d.id)), x: d.x, y: d.y, w: d.w, total: vt.total(d.id),
                 samples: vt.samples(d.id), matched: flame.matches(d.id) };
      });
    };
    api.tableRows = function (which) { return tables[which].rows(); };
    api.matchedWeight = function () { return flame.matcher ? forest.matchedWeight(flame.matcher) : 0; };
    api.tracks = function () {
      return timeline.tracks.map(function (t) { return state.byCpu ? 'CPU ' + t : PV.threadLabel(m, t); });
    };
    // The sandwich of the picked function as nested {name: [samples, period, {children}]}.
    api.sandwich = function (depth) {
      var s = api.sandwichData;
      if (!s) return null;
      function nest(tree, samples, period, id, d) {
        var out = {};
        tree.kids[id].forEach(function (k) {
          out[PV.frameName(m, tree.frame[k])] = [samples[k], period[k], d > 1 ? nest(tree, samples, period, k, d - 1) : {}];
        });
        return out;
      }
      return { callees: nest(s.callees, s.calleeSamples, s.calleePeriod, 0, depth),
               callers: nest(s.callers, s.callerSamples, s.callerPeriod, 0, depth), selfSamples: s.selfSamples,
               selfPeriod: s.selfPeriod };
    };
    api.functions = function () {
      var f = forest.functions(), out = {};
      f.total.forEach(function (v, fr) { out[PV.frameName(m, fr) + ' ' + PV.frameDso(m, fr)] = { total: v, self: f.self.get(fr) || 0 }; });
      return out;
    };
  }

  start();
})();
