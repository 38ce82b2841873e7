// Shared by the flame graph page (flamegraph.js) and the view page (view-*.js): colours by
// frame kind from a hash of the name, number formatting, and the search matcher.
(function () {
  'use strict';

  // FNV-1a hash of a string: the same name always gets the same colour.
  function hash(text) {
    var h = 0x811c9dc5;
    for (var k = 0; k < text.length; k++) {
      h ^= text.charCodeAt(k);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h >>> 0;
  }

  function hsl(h, s, l) {
    return 'hsl(' + h.toFixed(1) + ', ' + s.toFixed(1) + '%, ' + l.toFixed(1) + '%)';
  }

  // Hue family by kind, exact hue and shade from the name's hash; off-CPU frames in their own
  // colours whatever their kind (wait: 'blocked' blue, 'runnable' violet, '' none).
  function kindColor(kind, name, wait) {
    var h = hash(name), a = (h & 0xffff) / 0xffff, b = (h >>> 16) / 0xffff;
    if (wait === 'blocked') return hsl(234 + 16 * a, 72 + 10 * b, 70 + 8 * b);
    if (wait === 'runnable') return hsl(272 + 20 * a, 45 + 12 * b, 70 + 8 * b);
    switch (kind) {
      case 'user': return hsl(8 + 42 * a, 78 + 12 * b, 54 + 10 * b);
      case 'kernel': return hsl(192 + 32 * a, 58 + 12 * b, 56 + 10 * b);
      case 'jit': return hsl(92 + 40 * a, 45 + 12 * b, 50 + 10 * b);
      case 'python': return hsl(48 + 10 * a, 70 + 12 * b, 52 + 10 * b);
      case 'unknown': return hsl(0, 0, 62 + 14 * a);
      case 'state': return hsl(140, 40, 62 + 8 * a);   // [running]
      default: return hsl(262, 16, 72 + 8 * a);   // root and process frames
    }
  }

  // The wait state a state frame's label names: 'blocked', 'runnable' or ''.
  function waitOfLabel(label) {
    return label.indexOf('[blocked') === 0 ? 'blocked' : label.indexOf('[runnable') === 0 ? 'runnable' : '';
  }

  function groupDigits(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
  function percent(part, whole) { return whole > 0 ? (100 * part / whole).toFixed(2) + '%' : '0.00%'; }

  // A matcher for the search box: substring (or regular expression), case-insensitive unless
  // exact. null for no search, undefined for an invalid regular expression.
  function compileSearch(text, regex, exact) {
    if (!text) return null;
    if (!regex) {
      var needle = exact ? text : text.toLowerCase();
      return { test: function (s) { return (exact ? s : s.toLowerCase()).indexOf(needle) >= 0; } };
    }
    try {
      return new RegExp(text, exact ? '' : 'i');
    } catch (e) {
      return undefined;
    }
  }

  window.FlameCommon = {
    hash: hash, hsl: hsl, kindColor: kindColor, waitOfLabel: waitOfLabel,
    groupDigits: groupDigits, percent: percent, compileSearch: compileSearch,
    MATCH_COLOR: 'rgb(224, 64, 224)',
    FONT: '12px ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace'
  };
})();
