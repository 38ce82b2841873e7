// The view page's data: the packed capture (profiler/report/render/viewdata.py) inflated and
// turned into typed arrays, and the aggregations every view asks for, computed on demand.
//
//   PV.load(element)               -> the model: strings, frames, stack nodes, threads, events
//   new PV.Forest(model, event, merge)
//     .select(range, threadOn)     -> weighs the selection: per (thread, stack) pair, then the
//                                     call tree (.top: a ViewTree), lazily .bottomUp(),
//                                     .sandwich(frame), .functions()
//
// A stack node is (prefix, frame, line, offset): a sample's stack is its leaf node. The
// *merged tree* merges stack nodes by (parent, frame): it is built once at load and is the
// call tree of threads merged. With threads apart, a tree node is (thread, merged node), its
// weights computed per thread when a view asks for them (a few threads are cached).
(function () {
  'use strict';
  var PV = window.PV = window.PV || {};

  var ARRAYS = { uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, int8: Int8Array,
                 int16: Int16Array, int32: Int32Array, float64: Float64Array };

  function base64Bytes(text) {
    var raw = atob(text), n = raw.length, out = new Uint8Array(n);
    for (var i = 0; i < n; i++) out[i] = raw.charCodeAt(i);
    return out;
  }

  // Inflate the gzip'd document with the browser's DecompressionStream.
  function inflate(bytes) {
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).arrayBuffer();
  }

  function unpack(buffer) {
    var length = new DataView(buffer).getUint32(0, true);
    var doc = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, length)));
    var base = 4 + length;
    return { doc: doc, column: function (desc) {
      return new ARRAYS[desc.type](buffer, base + doc.columns[desc.col], desc.n);
    } };
  }

  function buildModel(doc, column) {
    var m = {
      doc: doc, strings: doc.strings, kinds: doc.kinds, threads: doc.threads,
      frames: column(doc.frames),
      prefix: column(doc.stacks.prefix), frame: column(doc.stacks.frame),
      line: column(doc.stacks.line), offset: column(doc.stacks.offset),
      events: [], endNs: doc.end_ns
    };
    m.nFrames = m.frames.length / 4;
    m.nNodes = m.prefix.length;
    // the function a leaf node's sample counts as self time of: the innermost frame that was
    // not inlined (self time goes to real functions, as in report --no-children and annotate)
    m.head = new Int32Array(m.nNodes);
    for (var n = 0; n < m.nNodes; n++) {
      var h = n;
      while (m.frames[4 * m.frame[h] + 3] && m.prefix[h] >= 0) h = m.prefix[h];
      m.head[n] = h;
    }
    buildMerged(m);
    doc.events.forEach(function (e) {
      var deltas = column(e.time), time = new Float64Array(deltas.length), t = 0;
      for (var i = 0; i < deltas.length; i++) { t += deltas[i]; time[i] = t; }
      var pairThread = column(e.pair_thread), pair = column(e.pair), thread = new Int32Array(pair.length);
      for (i = 0; i < pair.length; i++) thread[i] = pairThread[pair[i]];
      m.events.push({
        name: e.name, weight: e.weight, samples: e.samples, rows: e.rows, bucketNs: e.reduced_bucket_ns,
        hasCallchains: e.has_callchains, time: time, cpu: column(e.cpu), period: column(e.period),
        count: e.count ? column(e.count) : null, pair: pair, pairThread: pairThread,
        pairStack: column(e.pair_stack), thread: thread, pairsOf: threadRuns(pairThread, m.threads.length)
      });
    });
    return m;
  }

  // Each thread's run of pairs (the table is ordered by thread): [start, end) per thread.
  function threadRuns(pairThread, nThreads) {
    var start = new Int32Array(nThreads + 1).fill(-1), runs = new Int32Array(2 * nThreads);
    for (var p = 0; p < pairThread.length; p++) {
      var t = pairThread[p];
      if (start[t] < 0) { start[t] = p; runs[2 * t] = p; }
      runs[2 * t + 1] = p + 1;
    }
    return runs;
  }

  // The merged tree: node 0 is the root; mergedOf[stack node] its merged node; children in
  // CSR (kidStart, kids), each node's slice sorted by name the first time it is asked for.
  function buildMerged(m) {
    var n = m.nNodes, ids = new Map(), parent = [-1], frame = [-1];
    m.mergedOf = new Int32Array(n);
    for (var k = 0; k < n; k++) {
      var p = m.prefix[k] < 0 ? 0 : m.mergedOf[m.prefix[k]], key = p * (m.nFrames + 1) + m.frame[k];
      var id = ids.get(key);
      if (id === undefined) { id = parent.length; ids.set(key, id); parent.push(p); frame.push(m.frame[k]); }
      m.mergedOf[k] = id;
    }
    var size = parent.length, kidStart = new Int32Array(size + 1), kids = new Int32Array(size), fill;
    for (k = 1; k < size; k++) kidStart[parent[k] + 1]++;
    for (k = 0; k < size; k++) kidStart[k + 1] += kidStart[k];
    fill = kidStart.slice(0, size);
    for (k = 1; k < size; k++) kids[fill[parent[k]]++] = k;
    m.merged = { size: size, parent: Int32Array.from(parent), frame: Int32Array.from(frame), kidStart: kidStart,
                 kids: kids, sorted: new Uint8Array(size) };
  }

  PV.load = function (element) {
    return inflate(base64Bytes(element.textContent.trim())).then(function (buffer) {
      var u = unpack(buffer);
      return buildModel(u.doc, u.column);
    });
  };

  // --- frames --------------------------------------------------------------------------
  // Frame ids below nFrames are the capture's; above, one synthetic frame per thread (the
  // first level of a tree that keeps threads apart) and, at -1, the root 'all'.
  PV.frameName = function (m, f) {
    if (f < 0) return 'all';
    if (f >= m.nFrames) return PV.threadLabel(m, f - m.nFrames);
    return m.strings[m.frames[4 * f]];
  };
  PV.frameDso = function (m, f) { return f >= 0 && f < m.nFrames ? m.strings[m.frames[4 * f + 1]] : ''; };
  PV.frameKind = function (m, f) {
    if (f < 0) return 'root';
    return f >= m.nFrames ? 'process' : m.kinds[m.frames[4 * f + 2]];
  };
  PV.threadLabel = function (m, t) {
    var th = m.threads[t];
    return (m.strings[th[2]] || '?') + '-' + th[0] + '/' + th[1];
  };

  // The merged node's children, sorted by name (flame graph order).
  PV.mergedKids = function (m, id) {
    var t = m.merged, a = t.kidStart[id], b = t.kidStart[id + 1];
    if (!t.sorted[id]) {
      var slice = Array.from(t.kids.subarray(a, b));
      slice.sort(function (x, y) {
        var nx = PV.frameName(m, t.frame[x]), ny = PV.frameName(m, t.frame[y]);
        return nx < ny ? -1 : nx > ny ? 1 : t.frame[x] - t.frame[y];
      });
      t.kids.set(slice, a);
      t.sorted[id] = 1;
    }
    return t.kids.subarray(a, b);
  };

  // --- rows of a selection -------------------------------------------------------------
  function lowerBound(a, x) {
    var lo = 0, hi = a.length;
    while (lo < hi) { var mid = (lo + hi) >>> 1; if (a[mid] < x) lo = mid + 1; else hi = mid; }
    return lo;
  }
  PV.lowerBound = lowerBound;
  PV.rowRange = function (ev, range) {
    if (!range) return [0, ev.time.length];
    return [lowerBound(ev.time, range[0]), lowerBound(ev.time, range[1] + 0.5)];  // [lo, hi] inclusive
  };
  PV.rowWeight = function (ev, i) {
    if (ev.weight === 'period') return ev.period[i];
    return ev.count ? ev.count[i] : 1;
  };

  // Weight, samples and period of each (thread, stack) pair over the selection's rows.
  function tally(ev, range, threadOn) {
    var n = ev.pairThread.length, W = new Float64Array(n), S = new Float64Array(n), P = new Float64Array(n);
    var rows = PV.rowRange(ev, range), byPeriod = ev.weight === 'period', count = ev.count;
    var pair = ev.pair, period = ev.period, thread = ev.thread;
    for (var i = rows[0]; i < rows[1]; i++) {
      if (threadOn && !threadOn[thread[i]]) continue;
      var p = pair[i], c = count ? count[i] : 1;
      W[p] += byPeriod ? period[i] : c;
      S[p] += c;
      P[p] += period[i];
    }
    return { W: W, S: S, P: P };
  }

  // --- the forest of one event and merge mode ------------------------------------------
  function Forest(m, eventIndex, merge) {
    this.m = m; this.ev = m.events[eventIndex]; this.merge = merge;
    this.bottom = new PV.Tree(m.nFrames + m.threads.length + 1);
    this.bottomLeaf = new Map();  // pair -> bottom-up node
  }
  PV.Forest = Forest;

  Forest.prototype.select = function (range, threadOn) {
    var m = this.m, ev = this.ev, t = tally(ev, range, threadOn);
    this.t = t;
    // the merged tree's weights (the whole call tree with threads merged)
    var size = m.merged.size, total = new Float64Array(size), self = new Float64Array(size);
    var samples = new Float64Array(size), parent = m.merged.parent;
    var threadTotal = new Float64Array(m.threads.length), threadSamples = new Float64Array(m.threads.length);
    for (var p = 0; p < t.W.length; p++) {
      if (!t.W[p] && !t.S[p]) continue;
      var leaf = m.mergedOf[ev.pairStack[p]];
      self[leaf] += t.W[p]; total[leaf] += t.W[p]; samples[leaf] += t.S[p];
      threadTotal[ev.pairThread[p]] += t.W[p]; threadSamples[ev.pairThread[p]] += t.S[p];
    }
    for (var id = size - 1; id > 0; id--) { total[parent[id]] += total[id]; samples[parent[id]] += samples[id]; }
    this.mergedWeights = { total: total, self: self, samples: samples };
    this.top = this.merge ? new PV.MergedTree(m, this.mergedWeights)
                          : new PV.ThreadTree(m, this, threadTotal, threadSamples);
    this.bottomWeights = null;
    return this.top;
  };

  // One thread's weights over the merged tree (for a tree that keeps threads apart), into the
  // buffers of ``into`` ({total, self, samples} of the merged tree's size, zero): the nodes it
  // touches are listed in into.touched, so that the buffers can be cleared cheaply.
  Forest.prototype.threadWeights = function (g, into) {
    var m = this.m, ev = this.ev, t = this.t, parent = m.merged.parent;
    var total = into.total, self = into.self, samples = into.samples, touched = into.touched;
    var run0 = ev.pairsOf[2 * g], run1 = ev.pairsOf[2 * g + 1];
    for (var p = run0; p < run1; p++) {
      var w = t.W[p], s = t.S[p];
      if (!w && !s) continue;
      var leaf = m.mergedOf[ev.pairStack[p]];
      self[leaf] += w;
      for (var id = leaf; id > 0; id = parent[id]) {
        if (total[id] === 0 && samples[id] === 0) touched.push(id);
        total[id] += w; samples[id] += s;
      }
    }
    return into;
  };

  // The frames of a pair's stack, root first (with the thread's synthetic frame first when
  // threads are kept apart).
  Forest.prototype.pathOf = function (p) {
    var m = this.m, path = [];
    for (var n = this.ev.pairStack[p]; n >= 0; n = m.prefix[n]) path.push(m.frame[n]);
    if (!this.merge) path.push(m.nFrames + this.ev.pairThread[p]);
    return path.reverse();
  };

  // Bottom-up: the leaf's function first (inlined frames below it are folded into it), then
  // its callers to the root (and the thread). Nodes persist; weights are the selection's.
  Forest.prototype.bottomUp = function () {
    if (this.bottomWeights) return this.bottomWeights;
    var m = this.m, ev = this.ev, t = this.t, tree = this.bottom, leaves = [];
    for (var p = 0; p < t.W.length; p++) {
      if (!t.W[p] && !t.S[p]) continue;
      var id = this.bottomLeaf.get(p);
      if (id === undefined) {
        id = 0;
        for (var n = m.head[ev.pairStack[p]]; n >= 0; n = m.prefix[n]) id = tree.child(id, m.frame[n]);
        if (!this.merge) id = tree.child(id, m.nFrames + ev.pairThread[p]);
        this.bottomLeaf.set(p, id);
      }
      leaves.push(id, p);
    }
    var size = tree.size(), total = new Float64Array(size), samples = new Float64Array(size);
    for (var k = 0; k < leaves.length; k += 2) { total[leaves[k]] += t.W[leaves[k + 1]]; samples[leaves[k]] += t.S[leaves[k + 1]]; }
    for (id = size - 1; id > 0; id--) { total[tree.parent[id]] += total[id]; samples[tree.parent[id]] += samples[id]; }
    // the root's children are the functions with self time: their total is their self time
    this.bottomWeights = { total: total, samples: samples };
    return this.bottomWeights;
  };

  // Caller/callee trees of function f over the selection: every sample whose stack holds f
  // counts once, at f's outermost call. Callees: f then its callees to the leaf; callers: f
  // then its callers to the root. Two fresh trees (the sandwich is one function's).
  Forest.prototype.sandwich = function (f) {
    var m = this.m, t = this.t, all = m.nFrames + m.threads.length + 1;
    var callees = new PV.Tree(all), callers = new PV.Tree(all), ce = [0], cr = [0], cs = [0], rs = [0], cp = [0], rp = [0];
    var selfW = 0, selfS = 0, selfP = 0;
    function add(arr, id, v) { while (arr.length <= id) arr.push(0); arr[id] += v; }
    for (var p = 0; p < t.W.length; p++) {
      var w = t.W[p], s = t.S[p], pp = t.P[p];
      if (!w && !s) continue;
      var path = this.pathOf(p), at = path.indexOf(f);
      if (at < 0) continue;
      var id = 0, k;
      for (k = at; k < path.length; k++) { id = callees.child(id, path[k]); add(ce, id, w); add(cs, id, s); add(cp, id, pp); }
      id = 0;
      for (k = at; k >= 0; k--) { id = callers.child(id, path[k]); add(cr, id, w); add(rs, id, s); add(rp, id, pp); }
      if (m.frame[m.head[this.ev.pairStack[p]]] === f) { selfW += w; selfS += s; selfP += pp; }
    }
    return { callees: callees, calleeTotal: ce, calleeSamples: cs, calleePeriod: cp, callers: callers,
             callerTotal: cr, callerSamples: rs, callerPeriod: rp, selfWeight: selfW, selfSamples: selfS,
             selfPeriod: selfP };
  };

  // The selection's weight whose stacks hold a frame that matches (each sample once), with
  // threads' synthetic frames matched too when they are kept apart.
  Forest.prototype.matchedWeight = function (matcher) {
    var m = this.m, ev = this.ev, t = this.t, hit = new Uint8Array(m.nFrames), sum = 0;
    for (var f = 0; f < m.nFrames; f++) {
      hit[f] = matcher.test(PV.frameName(m, f)) || matcher.test(PV.frameDso(m, f)) ? 1 : 0;
    }
    for (var p = 0; p < t.W.length; p++) {
      if (!t.W[p]) continue;
      var found = !this.merge && matcher.test(PV.threadLabel(m, ev.pairThread[p]));
      for (var n = ev.pairStack[p]; n >= 0 && !found; n = m.prefix[n]) found = hit[m.frame[n]] === 1;
      if (found) sum += t.W[p];
    }
    return sum;
  };

  // Per function: self and total (each sample once per function) over the selection.
  Forest.prototype.functions = function () {
    var m = this.m, ev = this.ev, t = this.t, total = new Map(), self = new Map(), stamp = new Int32Array(m.nFrames).fill(-1);
    for (var p = 0; p < t.W.length; p++) {
      var w = t.W[p];
      if (!w) continue;
      var node = ev.pairStack[p], hf = m.frame[m.head[node]];
      self.set(hf, (self.get(hf) || 0) + w);
      for (var n = node; n >= 0; n = m.prefix[n]) {
        var f = m.frame[n];
        if (stamp[f] === p) continue;
        stamp[f] = p;
        total.set(f, (total.get(f) || 0) + w);
      }
    }
    return { total: total, self: self };
  };

  // The hottest source lines of a merged node (of thread g, or of all threads when g < 0):
  // its frame's line in each stack through it.
  Forest.prototype.lines = function (mid, g) {
    var m = this.m, ev = this.ev, t = this.t, acc = new Map(), sum = 0;
    var lo = g >= 0 ? ev.pairsOf[2 * g] : 0, hi = g >= 0 ? ev.pairsOf[2 * g + 1] : t.W.length;
    for (var p = lo; p < hi; p++) {
      if (!t.W[p]) continue;
      for (var n = ev.pairStack[p]; n >= 0; n = m.prefix[n]) {
        if (m.mergedOf[n] !== mid) continue;
        if (m.line[n] >= 0) { acc.set(m.line[n], (acc.get(m.line[n]) || 0) + t.W[p]); sum += t.W[p]; }
        break;
      }
    }
    return { lines: Array.from(acc.entries()).sort(function (a, b) { return b[1] - a[1]; }), sum: sum };
  };
})();
