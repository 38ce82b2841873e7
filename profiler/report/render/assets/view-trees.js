// The trees the views draw, behind one interface (a "view tree"):
//   root, kids(id) (sorted by name), frame(id), parent(id), total(id), self(id) (or null),
//   samples(id), and for source lines mergedId(id) and threadOf(id) (-1: all threads).
// PV.MergedTree: the call tree with threads merged (the model's merged tree, weighed).
// PV.ThreadTree: a level per thread, then that thread's call tree: node (g, merged node),
//   weighed per thread on demand (a few threads' weights cached).
// PV.Tree + PV.arrayView: a tree interned path by path (bottom-up, caller/callee) and its weights.
(function () {
  'use strict';
  var PV = window.PV;

  function MergedTree(m, w) { this.m = m; this.w = w; this.root = 0; }
  MergedTree.prototype.kids = function (id) { return PV.mergedKids(this.m, id); };
  MergedTree.prototype.frame = function (id) { return this.m.merged.frame[id]; };
  MergedTree.prototype.parent = function (id) { return this.m.merged.parent[id]; };
  MergedTree.prototype.total = function (id) { return this.w.total[id]; };
  MergedTree.prototype.self = function (id) { return this.w.self[id]; };
  MergedTree.prototype.samples = function (id) { return this.w.samples[id]; };
  MergedTree.prototype.mergedId = function (id) { return id; };
  MergedTree.prototype.threadOf = function () { return -1; };
  PV.MergedTree = MergedTree;

  var CACHED_THREADS = 8;

  // ids: 0 the root, 1 + g thread g, 1 + T + g * M + node for a merged node under thread g
  function ThreadTree(m, forest, threadTotal, threadSamples) {
    this.m = m; this.forest = forest; this.T = m.threads.length; this.M = m.merged.size;
    this.threadTotal = threadTotal; this.threadSamples = threadSamples; this.root = 0;
    this.cache = new Map();
    var sum = 0, n = 0;
    for (var g = 0; g < this.T; g++) { sum += threadTotal[g]; n += threadSamples[g]; }
    this.sum = sum; this.sumSamples = n;
    var self = this;
    this.threadKids = [];
    for (g = 0; g < this.T; g++) if (threadTotal[g] > 0 || threadSamples[g] > 0) this.threadKids.push(1 + g);
    this.threadKids.sort(function (a, b) {
      var na = PV.threadLabel(m, a - 1), nb = PV.threadLabel(m, b - 1);
      return na < nb ? -1 : na > nb ? 1 : a - b;
    });
    this.enc = function (g, node) { return node === 0 ? 1 + g : 1 + self.T + g * self.M + node; };
  }
  ThreadTree.prototype.split = function (id) {  // [thread, merged node]; [-1, 0] for the root
    if (id === 0) return [-1, 0];
    if (id <= this.T) return [id - 1, 0];
    var x = id - 1 - this.T;
    return [Math.floor(x / this.M), x % this.M];
  };
  // Thread g's weights, from a few reused buffers (a draw walks the threads one after another).
  ThreadTree.prototype.weights = function (g) {
    var w = this.cache.get(g);
    if (!w) {
      if (this.cache.size >= CACHED_THREADS) {
        var oldest = this.cache.keys().next().value;
        w = this.cache.get(oldest);
        this.cache.delete(oldest);
        for (var k = 0; k < w.touched.length; k++) {
          var id = w.touched[k];
          w.total[id] = 0; w.self[id] = 0; w.samples[id] = 0;
        }
        w.touched.length = 0;
      } else {
        var M = this.M;
        w = { total: new Float64Array(M), self: new Float64Array(M), samples: new Float64Array(M), touched: [] };
      }
      this.forest.threadWeights(g, w);
      this.cache.set(g, w);
    }
    return w;
  };
  ThreadTree.prototype.kids = function (id) {
    if (id === 0) return this.threadKids;
    var s = this.split(id), g = s[0], enc = this.enc;
    return Array.prototype.map.call(PV.mergedKids(this.m, s[1]), function (k) { return enc(g, k); });
  };
  ThreadTree.prototype.frame = function (id) {
    var s = this.split(id);
    return s[0] < 0 ? -1 : s[1] === 0 ? this.m.nFrames + s[0] : this.m.merged.frame[s[1]];
  };
  ThreadTree.prototype.parent = function (id) {
    var s = this.split(id);
    if (s[0] < 0) return -1;
    return s[1] === 0 ? 0 : this.enc(s[0], this.m.merged.parent[s[1]]);
  };
  ThreadTree.prototype.total = function (id) {
    var s = this.split(id);
    if (s[0] < 0) return this.sum;
    return s[1] === 0 ? this.threadTotal[s[0]] : this.weights(s[0]).total[s[1]];
  };
  ThreadTree.prototype.samples = function (id) {
    var s = this.split(id);
    if (s[0] < 0) return this.sumSamples;
    return s[1] === 0 ? this.threadSamples[s[0]] : this.weights(s[0]).samples[s[1]];
  };
  ThreadTree.prototype.self = function (id) {
    var s = this.split(id);
    return s[1] === 0 ? 0 : this.weights(s[0]).self[s[1]];
  };
  ThreadTree.prototype.mergedId = function (id) { return this.split(id)[1]; };
  ThreadTree.prototype.threadOf = function (id) { return this.split(id)[0]; };
  PV.ThreadTree = ThreadTree;

  // A tree interned path by path: nodes (parent, frame) keep their ids; parents come first.
  function Tree(nFramesAll) {
    this.all = nFramesAll + 1;
    this.parent = [-1]; this.frame = [-1]; this.kids = [[]]; this.ids = new Map();
  }
  Tree.prototype.child = function (p, f) {
    var key = p * this.all + f + 1, id = this.ids.get(key);
    if (id === undefined) {
      id = this.parent.length;
      this.ids.set(key, id);
      this.parent.push(p); this.frame.push(f); this.kids.push([]);
      this.kids[p].push(id);
    }
    return id;
  };
  Tree.prototype.size = function () { return this.parent.length; };
  PV.Tree = Tree;

  // A view tree over an interned Tree and its weight arrays (self: a function, or null).
  PV.arrayView = function (m, tree, total, samples, self) {
    return {
      root: 0,
      kids: function (id) {
        return tree.kids[id].slice().sort(function (a, b) {
          var na = PV.frameName(m, tree.frame[a]), nb = PV.frameName(m, tree.frame[b]);
          return na < nb ? -1 : na > nb ? 1 : a - b;
        });
      },
      frame: function (id) { return tree.frame[id]; },
      parent: function (id) { return tree.parent[id]; },
      total: function (id) { return total[id] || 0; },
      samples: function (id) { return samples[id] || 0; },
      self: self || function () { return null; },
      mergedId: function () { return -1; },
      threadOf: function () { return -1; }
    };
  };
})();
