// The view page's data: the packed capture (profiler/report/render/viewdata.py) inflated and
// turned into typed arrays, and the aggregations every view asks for, computed on demand:
//   PV.load()                       -> the model (strings, frames, stacks, threads, events)
//   PV.Forest(model, event, merge)  -> call trees of one event, top-down and bottom-up, whose
//                                      nodes persist; .select(range, threadOn) weighs them.
// A stack node is (prefix, frame, line, offset): a sample's stack is its leaf node.
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
    var view = new DataView(buffer);
    var length = view.getUint32(0, true);
    var doc = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, length)));
    var base = 4 + length;
    function column(desc) {
      var Type = ARRAYS[desc.type];
      return new Type(buffer, base + doc.columns[desc.col], desc.n);
    }
    return { doc: doc, column: column };
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
    doc.events.forEach(function (e) {
      var deltas = column(e.time), time = new Float64Array(deltas.length), t = 0;
      for (var i = 0; i < deltas.length; i++) { t += deltas[i]; time[i] = t; }
      m.events.push({
        name: e.name, weight: e.weight, samples: e.samples, rows: e.rows, bucketNs: e.reduced_bucket_ns,
        hasCallchains: e.has_callchains, time: time, thread: column(e.thread), cpu: column(e.cpu),
        stack: column(e.stack), period: column(e.period), count: e.count ? column(e.count) : null
      });
    });
    return m;
  }

  PV.load = function (element) {
    var bytes = base64Bytes(element.textContent.trim());
    return inflate(bytes).then(function (buffer) {
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

  // The weight, sample count and period of each distinct (thread group, leaf node) in the selection.
  // key = group * nNodes + node; group is the thread (or 0 when threads are merged).
  function tally(m, ev, range, threadOn, merge) {
    var rows = PV.rowRange(ev, range), weight = new Map(), samples = new Map(), period = new Map();
    var byPeriod = ev.weight === 'period', count = ev.count;
    for (var i = rows[0]; i < rows[1]; i++) {
      var th = ev.thread[i];
      if (threadOn && !threadOn[th]) continue;
      var key = (merge ? 0 : th) * m.nNodes + ev.stack[i];
      var c = count ? count[i] : 1;
      weight.set(key, (weight.get(key) || 0) + (byPeriod ? ev.period[i] : c));
      samples.set(key, (samples.get(key) || 0) + c);
      period.set(key, (period.get(key) || 0) + ev.period[i]);
    }
    return { weight: weight, samples: samples, period: period };
  }
  PV.tally = tally;

  // --- persistent trees ----------------------------------------------------------------
  // Nodes are interned once (parent, frame) and keep their ids; a selection only fills the
  // weight arrays. Parents always have smaller ids than their children.
  function Tree() {
    this.parent = [-1]; this.frame = [-1]; this.kids = [[]]; this.ids = new Map(); this.sorted = [true];
  }
  Tree.prototype.child = function (p, f, nFramesAll) {
    var key = p * nFramesAll + f + 1, id = this.ids.get(key);
    if (id === undefined) {
      id = this.parent.length;
      this.ids.set(key, id);
      this.parent.push(p); this.frame.push(f); this.kids.push([]); this.sorted.push(true);
      this.kids[p].push(id);
      this.sorted[p] = false;
    }
    return id;
  };
  Tree.prototype.size = function () { return this.parent.length; };

  // The frames of a leaf node, root first (with the thread's synthetic frame first when kept).
  function pathOf(m, key, merge) {
    var node = key % m.nNodes, group = (key - node) / m.nNodes, path = [];
    for (var n = node; n >= 0; n = m.prefix[n]) path.push(m.frame[n]);
    if (!merge) path.push(m.nFrames + group);
    return path.reverse();
  }
  PV.pathOf = pathOf;

  function Forest(m, eventIndex, merge) {
    this.m = m; this.ev = m.events[eventIndex]; this.merge = merge;
    this.all = m.nFrames + m.threads.length + 1;
    this.top = new Tree(); this.bottom = new Tree();
    this.topLeaf = new Map(); this.bottomLeaf = new Map();  // key -> node
  }
  PV.Forest = Forest;

  Forest.prototype.topNode = function (key) {
    var id = this.topLeaf.get(key);
    if (id !== undefined) return id;
    var path = pathOf(this.m, key, this.merge);
    id = 0;
    for (var k = 0; k < path.length; k++) id = this.top.child(id, path[k], this.all);
    this.topLeaf.set(key, id);
    return id;
  };

  // Bottom-up: the leaf's function first (inlined frames below it are folded into it), then
  // its callers to the root (and the thread).
  Forest.prototype.bottomNode = function (key) {
    var id = this.bottomLeaf.get(key);
    if (id !== undefined) return id;
    var m = this.m, node = key % m.nNodes, group = (key - node) / m.nNodes;
    id = 0;
    for (var n = m.head[node]; n >= 0; n = m.prefix[n]) id = this.bottom.child(id, m.frame[n], this.all);
    if (!this.merge) id = this.bottom.child(id, m.nFrames + group, this.all);
    this.bottomLeaf.set(key, id);
    return id;
  };

  // Weigh both trees for a selection: total (node and below), self and samples per node.
  // Bottom-up totals are computed on the first call of .bottomUp() only (lazily).
  Forest.prototype.select = function (range, threadOn) {
    var t = tally(this.m, this.ev, range, threadOn, this.merge);
    this.tallied = t;
    var leaves = [], self = this;
    t.weight.forEach(function (w, key) { leaves.push([self.topNode(key), w, t.samples.get(key), key]); });
    var size = this.top.size(), total = new Float64Array(size), own = new Float64Array(size);
    var samples = new Float64Array(size);
    leaves.forEach(function (l) { own[l[0]] += l[1]; total[l[0]] += l[1]; samples[l[0]] += l[2]; });
    var parent = this.top.parent;
    for (var id = size - 1; id > 0; id--) { total[parent[id]] += total[id]; samples[parent[id]] += samples[id]; }
    this.weights = { total: total, self: own, samples: samples };
    this.bottomWeights = null;
    return this.weights;
  };

  Forest.prototype.bottomUp = function () {
    if (this.bottomWeights) return this.bottomWeights;
    var t = this.tallied, self = this, tree = this.bottom;
    var leaves = [];
    t.weight.forEach(function (w, key) { leaves.push([self.bottomNode(key), w, t.samples.get(key)]); });
    var size = tree.size(), total = new Float64Array(size), samples = new Float64Array(size);
    leaves.forEach(function (l) { total[l[0]] += l[1]; samples[l[0]] += l[2]; });
    for (var id = size - 1; id > 0; id--) { total[tree.parent[id]] += total[id]; samples[tree.parent[id]] += samples[id]; }
    // the root's children are the functions with self time: their total is their self time
    this.bottomWeights = { total: total, self: total, samples: samples };
    return this.bottomWeights;
  };

  // Children of a node with weight, sorted by name (flame graph order) or by a weight.
  Forest.prototype.sortedKids = function (tree, id) {
    if (!tree.sorted[id]) {
      var m = this.m;
      tree.kids[id].sort(function (a, b) {
        var na = PV.frameName(m, tree.frame[a]), nb = PV.frameName(m, tree.frame[b]);
        return na < nb ? -1 : na > nb ? 1 : tree.frame[a] - tree.frame[b];
      });
      tree.sorted[id] = true;
    }
    return tree.kids[id];
  };

  // Caller/callee trees of function f over the selection: every sample whose stack holds f
  // counts once, at f's outermost call. Callees: f then its callees to the leaf; callers: f
  // then its callers to the root. Two fresh trees (the sandwich is one function's).
  Forest.prototype.sandwich = function (f) {
    var m = this.m, t = this.tallied, merge = this.merge, all = this.all;
    var callees = new Tree(), callers = new Tree(), ce = [0], cr = [0], cs = [0], rs = [0], cp = [0], rp = [0];
    var selfW = 0, selfS = 0, selfP = 0;
    function add(arr, id, w) { while (arr.length <= id) arr.push(0); arr[id] += w; }
    t.weight.forEach(function (w, key) {
      var path = pathOf(m, key, merge), at = path.indexOf(f);
      if (at < 0) return;
      var s = t.samples.get(key), p = t.period.get(key), id = 0, k;
      for (k = at; k < path.length; k++) {
        id = callees.child(id, path[k], all); add(ce, id, w); add(cs, id, s); add(cp, id, p);
      }
      id = 0;
      for (k = at; k >= 0; k--) { id = callers.child(id, path[k], all); add(cr, id, w); add(rs, id, s); add(rp, id, p); }
      var node = key % m.nNodes;
      if (m.frame[m.head[node]] === f) { selfW += w; selfS += s; selfP += p; }
    });
    return { callees: callees, calleeTotal: ce, calleeSamples: cs, calleePeriod: cp, callers: callers,
             callerTotal: cr, callerSamples: rs, callerPeriod: rp, selfWeight: selfW, selfSamples: selfS,
             selfPeriod: selfP };
  };

  // Per function: self and total (each sample once per function) over the selection.
  Forest.prototype.functions = function () {
    var m = this.m, t = this.tallied, total = new Map(), self = new Map(), stamp = new Map(), serial = 0;
    t.weight.forEach(function (w, key) {
      serial++;
      var node = key % m.nNodes, hf = m.frame[m.head[node]];
      self.set(hf, (self.get(hf) || 0) + w);
      for (var n = node; n >= 0; n = m.prefix[n]) {
        var f = m.frame[n];
        if (stamp.get(f) === serial) continue;
        stamp.set(f, serial);
        total.set(f, (total.get(f) || 0) + w);
      }
    });
    return { total: total, self: self };
  };
})();
