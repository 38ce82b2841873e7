// Source and assembly of one function over the selection: the samples whose leaf function it
// is, per source line and per instruction, as shares of the function's period (annotate's
// "local period"). The assembly and source text are in the file for the hottest functions
// (profiler view --annotate N; --no-source leaves the source text out).
(function () {
  'use strict';
  var PV = window.PV, C = window.FlameCommon;

  // Per line (string id) and per offset: [period, samples] of function f's own samples.
  PV.functionShares = function (m, ev, range, threadOn, f) {
    var rows = PV.rowRange(ev, range), lines = new Map(), offsets = new Map(), period = 0, samples = 0;
    for (var i = rows[0]; i < rows[1]; i++) {
      if (threadOn && !threadOn[ev.thread[i]]) continue;
      var leaf = ev.pairStack[ev.pair[i]], head = m.head[leaf];
      if (m.frame[head] !== f) continue;
      var p = ev.period[i], c = ev.count ? ev.count[i] : 1;
      period += p; samples += c;
      add(lines, m.line[leaf], p, c);
      add(offsets, m.offset[head], p, c);
    }
    return { lines: lines, offsets: offsets, period: period, samples: samples };
  };

  function add(map, key, p, c) {
    var v = map.get(key);
    if (!v) map.set(key, [p, c]); else { v[0] += p; v[1] += c; }
  }

  function basename(path) { return path.slice(path.lastIndexOf('/') + 1); }

  // The embedded source file a "file.c:12" line names (by path or by base name).
  function sourceFor(m, file) {
    var sources = m.doc.sources;
    if (sources[file] !== undefined) return { path: file, text: sources[file] };
    for (var path in sources) if (basename(path) === basename(file)) return { path: path, text: sources[path] };
    return null;
  }

  PV.asmFor = function (m, f) {
    var name = PV.frameName(m, f), dso = PV.frameDso(m, f);
    for (var k = 0; k < m.doc.asm.length; k++) {
      var a = m.doc.asm[k];
      if (m.strings[a.name] === name && m.strings[a.dso] === dso) return a;
    }
    return null;
  };

  PV.renderSource = function (host, m, ev, range, threadOn, f) {
    if (f < 0 || f >= m.nFrames) {
      host.innerHTML = '<p class="note">Click a function in the flame graph or a call tree to see its source and assembly.</p>';
      return null;
    }
    var sh = PV.functionShares(m, ev, range, threadOn, f), esc = PV.escapeHtml;
    var html = '<h3>' + esc(PV.frameName(m, f)) + ' <span class="dso">' + esc(PV.frameDso(m, f)) + '</span></h3>' +
      '<p>' + C.groupDigits(sh.samples) + ' samples with this function as leaf in the selection; percent of their period</p>';
    html += sourceHtml(m, sh) + asmHtml(m, f, sh);
    host.innerHTML = html;
    return sh;
  };

  function sourceHtml(m, sh) {
    var esc = PV.escapeHtml, byFile = new Map(), noLine = null;
    sh.lines.forEach(function (v, id) {
      if (id < 0) { noLine = v; return; }
      var text = m.strings[id], colon = text.lastIndexOf(':'), file = text.slice(0, colon), line = +text.slice(colon + 1);
      if (!byFile.has(file)) byFile.set(file, new Map());
      byFile.get(file).set(line, v);
    });
    var out = '<h4>Source lines</h4>';
    if (!byFile.size) out += '<p class="note">No source lines for this function (no DWARF line table).</p>';
    byFile.forEach(function (lines, file) {
      var src = sourceFor(m, file), nums = Array.from(lines.keys()).sort(function (a, b) { return a - b; });
      out += '<table class="src"><thead><tr><th class="num">Percent</th><th class="num">Samples</th><th class="num">Line</th><th>' +
        esc(src ? src.path : file) + '</th></tr></thead><tbody>';
      if (src && src.text) {
        var lo = Math.max(1, nums[0] - 3), hi = Math.min(src.text.length, nums[nums.length - 1] + 3);
        for (var n = lo; n <= hi; n++) out += lineRow(n, lines.get(n), src.text[n - 1], sh.period);
      } else {
        nums.forEach(function (n) { out += lineRow(n, lines.get(n), null, sh.period); });
        out += '<tr><td colspan="4" class="note">' + (m.doc.source_omitted ? 'source text left out (--no-source)'
          : src ? 'source file unreadable or too large when the view was written' : 'source file not in this view') + '</td></tr>';
      }
      out += '</tbody></table>';
    });
    if (noLine) out += '<p class="note">' + C.percent(noLine[0], sh.period) + ' at addresses without a source line</p>';
    return out;
  }

  function lineRow(n, v, text, whole) {
    return '<tr class="' + (v ? 'hot' : '') + '" data-line="' + n + '"><td class="num">' + (v ? C.percent(v[0], whole) : '') +
      '</td><td class="num">' + (v ? C.groupDigits(v[1]) : '') + '</td><td class="num">' + n + '</td><td class="code">' +
      (text === null ? '' : PV.escapeHtml(text)) + '</td></tr>';
  }

  function asmHtml(m, f, sh) {
    var a = PV.asmFor(m, f), esc = PV.escapeHtml;
    if (!a) return '<h4>Assembly</h4><p class="note">Not in this file: only the hottest functions with a readable binary ' +
      'are disassembled (profiler view --annotate N), user-space ELF code only.</p>';
    var out = '<h4>Assembly</h4><table class="asm"><thead><tr><th class="num">Percent</th><th class="num">Samples</th>' +
      '<th>Address</th><th>Instruction</th><th>Line</th></tr></thead><tbody>';
    a.ins.forEach(function (ins) {
      var v = sh.offsets.get(ins[0]);
      out += '<tr class="' + (v ? 'hot' : '') + '" data-offset="' + ins[0] + '"><td class="num">' + (v ? C.percent(v[0], sh.period) : '') +
        '</td><td class="num">' + (v ? C.groupDigits(v[1]) : '') + '</td><td>' + (a.start + ins[0]).toString(16) +
        '</td><td class="code">' + esc(ins[1]) + '</td><td>' + (ins[2] >= 0 ? esc(m.strings[ins[2]]) : '') + '</td></tr>';
    });
    return out + '</tbody></table>';
  }
})();
