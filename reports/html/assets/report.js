// report.js — draws the rankscope report from the JSON embedded in the page (Chart.js 3).
//
// Is: the charts and tables of the skew report (per-rank breakdown, GPU time by range when there
// are kernel records, time per top-level range,
// rank x step heatmap, arrival skew at one step's collectives, counters) and of the scaling
// report (time vs T on log-log axes, tokens/s), of the start-up report (phases per rank), and of
// the diff report (the waterfall of a step's change, each part in both runs, settings), and
// hangdoctor's verdict (what each artifact said, each culprit's evidence, the ranks). When
// done it marks <body> with data-rankscope-rendered="yes" and the number of charts and points
// drawn, and counts script errors in data-rankscope-errors, so a headless browser can tell that
// the report rendered.
// Is not: analysis; every number comes from the JSON.
(function () {
  'use strict';
  var state = { charts: 0, points: 0, errors: [] };
  var body = document.body;

  function mark() {
    body.setAttribute('data-rankscope-charts', String(state.charts));
    body.setAttribute('data-rankscope-points', String(state.points));
    body.setAttribute('data-rankscope-errors', String(state.errors.length));
    if (state.errors.length) body.setAttribute('data-rankscope-error-text', state.errors.join(' | '));
  }
  window.addEventListener('error', function (e) { state.errors.push(String(e.message)); mark(); });
  var consoleError = console.error;
  console.error = function () {
    state.errors.push(Array.prototype.join.call(arguments, ' '));
    mark();
    consoleError.apply(console, arguments);
  };

  var palette = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
  function color(i) { return palette[i % palette.length]; }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fmt(v, digits) { return v === null || v === undefined ? '–' : Number(v).toFixed(digits === undefined ? 1 : digits); }

  // A titled canvas in the charts section.
  function panel(title, note, width, height) {
    var div = el('div', { 'class': 'chart' });
    div.appendChild(el('h3', {}, title));
    if (note) div.appendChild(el('p', { 'class': 'note' }, note));
    var canvas = el('canvas', { width: String(width || 1100), height: String(height || 340) });
    div.appendChild(canvas);
    document.getElementById('charts').appendChild(div);
    return canvas;
  }

  function chart(canvas, config) {
    config.options = Object.assign({ animation: false, responsive: false }, config.options || {});
    var c = new Chart(canvas.getContext('2d'), config);
    state.charts += 1;
    c.data.datasets.forEach(function (d) { state.points += d.data.filter(function (v) { return v !== null; }).length; });
    return c;
  }

  function table(title, headers, rows, cls) {
    var sec = document.getElementById('tables');
    sec.appendChild(el('h2', {}, title));
    var t = el('table', cls ? { 'class': cls } : {});
    var tr = el('tr');
    headers.forEach(function (h) { tr.appendChild(el('th', {}, h)); });
    t.appendChild(tr);
    rows.forEach(function (r) {
      var row = el('tr');
      r.forEach(function (v) { row.appendChild(el('td', {}, String(v))); });
      t.appendChild(row);
    });
    sec.appendChild(t);
  }

  function findings(list) {
    var ol = document.getElementById('finding-list');
    if (!list || !list.length) { ol.appendChild(el('li', {}, 'No findings.')); return; }
    list.forEach(function (f) {
      var li = el('li');
      // A share of work with no measurable cost yet shows what it predicts ("22:1 share").
      var cost = f.cost_ms_per_step < 0.05 && f.share ? f.share + ' share' : fmt(f.cost_ms_per_step, 1) + ' ms/step';
      li.appendChild(el('span', { 'class': 'cost' }, cost));
      li.appendChild(el('span', { 'class': 'kind' }, f.kind));
      if (f['class']) li.appendChild(el('span', { 'class': 'kind' }, f['class'].replace(/_/g, ' ')));
      li.appendChild(document.createTextNode(f.text));
      // A finding that rests on a rank read in part says so under it (skew schema 3).
      (f.caveats || []).forEach(function (c) { li.appendChild(el('div', { 'class': 'caveat' }, 'caveat: ' + c)); });
      ol.appendChild(li);
    });
  }

  function problems(list) {
    if (!list || !list.length) return;
    var sec = document.getElementById('problems');
    sec.appendChild(el('h2', {}, 'Problems reading the run'));
    var ul = el('ul');
    list.forEach(function (p) { ul.appendChild(el('li', {}, p)); });
    sec.appendChild(ul);
  }

  // A run imported from Nsight Systems or PyTorch profiler traces (rankscope import-nsys,
  // import-kineto): where each rank came from and how its clock was placed, first among the tables.
  function provenance(src) {
    if (!src || (src.kind !== 'nsys' && src.kind !== 'kineto') || !src.ranks) return;
    var kineto = src.kind === 'kineto';
    var s = document.getElementById('summary');
    s.textContent += kineto ? ' · imported from PyTorch profiler (Kineto) traces (' + src.ranks.length + ' files' +
        (src.ranks.length && src.ranks[0].producer ? '; ' + src.ranks[0].producer : '') + ')'
      : ' · imported from Nsight Systems (' + src.ranks.length + ' exports)';
    var ranks = src.ranks.length > 64 ? src.ranks.slice(0, 64) : src.ranks;
    table('Provenance' + (src.ranks.length > 64 ? ': the first 64 of ' + src.ranks.length + ' ranks' : ''),
      ['rank', 'file', 'host', 'nsys', 'schema', 'offset ms', 'error ms', 'alignment', 'rank from', 'steps from'],
      ranks.map(function (r) {
        var a = r.alignment || {};
        return [r.rank, String(r.file).split('/').pop(), r.host, kineto ? r.producer : r.nsys_version, kineto ? '' : r.schema_version, fmt(a.offset_ms, 3),
          a.residual_ms < 0 ? '?' : fmt(a.residual_ms, 3), a.method, r.identity, r.steps_from];
      }));
  }

  // --- skew ---

  // Ranks whose evidence ends early (a trace the import read in part, an event stream that stops
  // before the others'): named in the summary line and in their own table, before every figure.
  function partialRanks(data) {
    var list = data.partial_ranks || [];
    if (!list.length) return;
    document.getElementById('summary').textContent += ' · partial rank' + (list.length === 1 ? ' ' : 's ') +
      list.map(function (p) { return p.rank; }).join(', ') + ' (read in part: see below)';
    table('Ranks read in part', ['rank', 'why', 'last step', 'complete up to step', 'kernel records complete up to step', 'left out'],
      list.map(function (p) {
        return [p.rank, p.reason, p.last_step, p.last_complete_step < 0 ? 'none' : p.last_complete_step,
          !p.device_cut ? '–' : p.last_complete_device_step < 0 ? 'none' : p.last_complete_device_step, p.left_out || '–'];
      }));
  }

  // Delays within the run's own spread: one line under the findings, never a finding.
  function belowNoise(data) {
    var list = data.below_noise || [];
    if (!list.length) return;
    var parts = list.map(function (b) {
      var what = b.kind === 'straggler' ? 'slower' : b.sites > 1 ? 'last at ' + b.sites + ' collectives' : 'last at a collective';
      return 'rank ' + b.rank + ' ' + what + ' by ' + fmt(b.delay_ms, 1) + ' ms (noise ' + fmt(b.noise_ms, 1) + ' ms)';
    });
    var p = el('p', { 'class': 'caveat' }, 'Below the run\'s noise (under 2x), not findings: ' + parts.join('; '));
    document.getElementById('findings').insertBefore(p, document.getElementById('what-if'));
  }

  // Each process group's collectives of a step: calls, a rank's bytes, the transfer after the last
  // arrival and its rate (busbw as nccl-tests reports it, where the op has a factor).
  function groups(data) {
    var list = (data.groups || []).filter(function (g) { return g.ranks >= 2 && (g.transfer_ms_per_step > 0 || g.bytes_per_step > 0); });
    if (!list.length) return;
    list.sort(function (a, b) { return b.transfer_ms_per_step - a.transfer_ms_per_step; });
    var rate = function (gbps) { return gbps <= 0 ? '–' : gbps >= 1 ? fmt(gbps, 2) + ' GB/s' : fmt(gbps * 1e3, 1) + ' MB/s'; };
    table('Collectives a step by group (a rank\'s bytes; the time some call moved data after its last rank arrived, and the rate over it)' + (list.length > 64 ? ': the 64 longest of ' + list.length : ''),
      ['group', 'ranks', 'calls', 'MB', 'moving data, ms', 'algbw', 'busbw'],
      list.slice(0, 64).map(function (g) {
        return [g.comm, g.ranks, fmt(g.calls_per_step, 1), g.bytes_per_step > 0 ? fmt(g.bytes_per_step / 1e6, 2) : 'not recorded',
          fmt(g.transfer_ms_per_step, 2), rate(g.algbw_gbps), rate(g.busbw_gbps)];
      }));
  }

  // Beyond MANY ranks one bar per rank is unreadable: the per-rank charts show the TOP_K slowest
  // ranks by name plus the median rank, and the distributions show every rank in bins.
  var MANY = 16, TOP_K = 8;
  function presentRanks(data) { return data.ranks.filter(function (r) { return r.present; }); }
  // Slowest first by the straggler score (fastest rank's time outside collectives / this rank's,
  // so lower is slower); the median step cannot tell, as collectives make every rank's step equal.
  function slowestFirst(ranks) {
    var score = function (r) { return r.straggler_score && r.straggler_score.relative !== null ? r.straggler_score.relative : 1; };
    return ranks.slice().sort(function (a, b) { return score(a) - score(b) || a.rank - b.rank; });
  }
  function median(values) {
    var v = values.filter(function (x) { return x !== null && x !== undefined; }).sort(function (a, b) { return a - b; });
    if (!v.length) return null;
    var m = Math.floor(v.length / 2);
    return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  }
  // Bars per rank, or for many ranks: the TOP_K slowest by name and a bar for the median rank.
  // value(r) gives one bar's value for a rank; returns {labels, values(valueFn), note}.
  function rankBars(ranks) {
    if (ranks.length <= MANY) {
      return { labels: ranks.map(function (r) { return 'rank ' + r.rank; }), note: '',
        values: function (f) { return ranks.map(f); } };
    }
    var top = slowestFirst(ranks).slice(0, TOP_K);
    return {
      labels: top.map(function (r) { return 'rank ' + r.rank; }).concat(['median of ' + ranks.length]),
      note: '; the ' + TOP_K + ' slowest of ' + ranks.length + ' ranks by straggler score, then the median over all ranks',
      values: function (f) { return top.map(f).concat([median(ranks.map(f))]); }
    };
  }
  // A histogram of one value per rank: what many ranks look like at a glance.
  function histogram(title, note, values, unit, k) {
    var v = values.filter(function (x) { return x !== null && x !== undefined; });
    if (!v.length) return;
    var lo = Math.min.apply(null, v), hi = Math.max.apply(null, v);
    var bins = hi > lo ? Math.min(30, Math.max(5, Math.ceil(Math.sqrt(v.length)))) : 1;
    var width = hi > lo ? (hi - lo) / bins : 1;
    var counts = new Array(bins).fill(0);
    v.forEach(function (x) { counts[Math.min(bins - 1, Math.floor((x - lo) / width))] += 1; });
    chart(panel(title, note, 1100, 240), {
      type: 'bar',
      data: {
        labels: counts.map(function (_, i) { return fmt(lo + (i + 0.5) * width, 2); }),
        datasets: [{ label: 'ranks', backgroundColor: color(k), data: counts }]
      },
      options: { plugins: { legend: { display: false } },
        scales: { x: { title: { display: true, text: unit } }, y: { title: { display: true, text: 'ranks' } } } }
    });
  }
  // Bytes read as MiB or GiB, never raw: the unit follows the largest value.
  function isBytes(name) { return /bytes/.test(name) || /^mem\./.test(name); }
  function byteScale(values) {
    var hi = Math.max.apply(null, values.filter(function (x) { return x !== null && x !== undefined; }).concat([0]));
    return hi >= 1073741824 ? { div: 1073741824, unit: 'GiB' } : { div: 1048576, unit: 'MiB' };
  }

  function breakdown(data) {
    var ranks = presentRanks(data);
    var bars = rankBars(ranks);
    var parts = [['compute', 'compute'], ['collective_wait', 'collective wait'], ['collective_transfer', 'collective transfer'], ['memcpy', 'memcpy'], ['idle', 'idle']];
    var onDevice = ranks.some(function (r) { return r.breakdown_ms.source === 'device'; });
    var note = onDevice
      ? 'mean ms per step; GPU time of the traced steps where a rank has kernel records (transfer = communication kernels, memcpy = memcpys/memsets, idle = GPU waiting for the host), host time otherwise'
      : 'mean ms per step; collective wait = time waiting for the last arriver';
    chart(panel('Where each rank spends a step', note + bars.note), {
      type: 'bar',
      data: {
        labels: bars.labels,
        datasets: parts.map(function (p, i) {
          return { label: p[1], backgroundColor: color(i), data: bars.values(function (r) { return r.breakdown_ms[p[0]] || 0; }) };
        })
      },
      options: { scales: { x: { stacked: true }, y: { stacked: true, title: { display: true, text: 'ms per step' } } } }
    });
    if (ranks.length > MANY) {
      histogram('Compute time over ' + ranks.length + ' ranks', 'how many ranks spend each mean compute ms per step; a straggler sits alone on the right',
        ranks.map(function (r) { return r.breakdown_ms.compute; }), 'compute ms per step', 0);
    }
  }

  // On a GPU the host returns from a range at launch: GPU time per range comes from the kernel
  // records, with the kernels launched outside every range as their own bar.
  function gpuRanges(data) {
    var d = data.device;
    if (!d) return;
    // The unattributed kernel time takes its place among the ranges, largest first.
    var shown = d.ranges.concat(d.outside_ranges_ms > 0 ? [{ range: '(outside any range)', ms: d.outside_ranges_ms }] : [])
      .sort(function (a, b) { return b.ms - a.ms; }).slice(0, 16);
    var labels = shown.map(function (r) { return r.range; });
    var values = shown.map(function (r) { return r.ms; });
    chart(panel('GPU time by range',
      'kernel ms per step, steps ' + d.first_traced_step + '–' + d.last_traced_step + ' (kernel records), mean of ' + d.ranks +
      ' rank' + (d.ranks === 1 ? '' : 's') + '; step ' + fmt(d.step_ms, 1) + ' ms = compute ' + fmt(d.compute_ms, 1) +
      ' + transfer ' + fmt(d.transfer_ms, 1) + ' + memcpy ' + fmt(d.memcpy_ms || 0, 1) + ' + idle ' + fmt(d.idle_ms, 1) +
      (d.host_bound_ms !== undefined ? ' (gaps on the device timeline; ' + fmt(d.host_bound_ms, 1) + ' of it host-bound)' : '') + '; ' + fmt(d.outside_ranges_ms, 1) +
      ' ms in kernels launched outside every range; a range\'s bar is the time some kernel of it runs', 1100, 60 + 22 * labels.length), {
      type: 'bar',
      data: { labels: labels, datasets: [{ label: 'kernel ms per step', backgroundColor: color(0), data: values }] },
      options: { indexAxis: 'y', plugins: { legend: { display: false } }, scales: { x: { title: { display: true, text: 'ms per step' } } } }
    });
  }

  // HTA's analyses (`kernels` in skew's JSON): overlap and idle by cause per rank, the findings.
  function deviceAnalyses(data) {
    var k = data.kernels;
    if (!k || !k.ranks) return;
    var ranks = k.ranks.filter(function (r) { return !r.problem; });
    if (!ranks.length) return;
    // The 64 ranks with the least overlap first: those are where communication is exposed.
    var ov = function (r) { return r.overlap && r.overlap.ratio !== null ? r.overlap.ratio : 1; };
    var shown = ranks.slice().sort(function (a, b) { return ov(a) - ov(b) || a.rank - b.rank; }).slice(0, 64);
    var labels = shown.map(function (r) { return 'rank ' + r.rank + (r.idle && r.idle.host_bound ? ' (host-bound)' : ''); });
    var exposedLabels = shown.map(function (r, i) { return labels[i] + ', exposed ' + fmt(r.overlap.exposed_communication_ms_per_step, 2) + ' ms'; });
    chart(panel('Communication overlapped by compute',
      'per rank, % of communication-kernel time during which a compute kernel also runs (HTA\'s overlap); each label gives the communication ms per step with no compute beside it' +
      (ranks.length > 64 ? '; the 64 ranks with the least overlap of ' + ranks.length : ''), 1100, 60 + 18 * labels.length), {
      type: 'bar',
      data: { labels: exposedLabels, datasets: [
        { label: 'overlap %', backgroundColor: color(0), data: shown.map(function (r) { return r.overlap.ratio === null ? null : 100 * r.overlap.ratio; }) }] },
      options: { indexAxis: 'y', plugins: { legend: { display: false } }, scales: { x: { min: 0, max: 100, title: { display: true, text: '% overlapped' } } } }
    });
    var perStep = function (r, key) { return r.traced_steps ? r.idle.device[key] / r.traced_steps : 0; };
    chart(panel('GPU idle by cause',
      'ms per traced step in gaps where no stream runs anything: host wait (the next op was launched after the gap began: the CPU was late), ' +
      'kernel wait (short gaps between back-to-back ops), other', 1100, 60 + 18 * labels.length), {
      type: 'bar',
      data: { labels: labels, datasets: [['host_wait_ms', 'host wait'], ['kernel_wait_ms', 'kernel wait'], ['other_ms', 'other']].map(function (p, i) {
        return { label: p[1], backgroundColor: color(i + 4), data: shown.map(function (r) { return perStep(r, p[0]); }) };
      }) },
      options: { indexAxis: 'y', scales: { x: { stacked: true }, y: { stacked: true } } }
    });
    if ((k.findings || []).length)
      table('GPU findings (rankscope kernels)', ['kind', 'ranks', 'ms per step', 'finding'],
        k.findings.map(function (f) { return [f.kind, f.ranks.join(','), fmt(f.cost_ms_per_step, 2), f.text]; }));
  }

  // The critical path of the traced steps (`critical_path` in skew's JSON): its share by rank, and
  // the ranges and items on it.
  function criticalPath(data) {
    var p = data.critical_path;
    if (!p || !p.by_rank || !p.by_rank.length) return;
    var ranks = p.by_rank.slice(0, 32);
    chart(panel('Critical path by rank', p.summary + ' (mean of ' + p.steps_analysed + ' traced step' + (p.steps_analysed === 1 ? '' : 's') +
      '; `rankscope critical-path` lists each step\'s path)', 1100, 60 + 20 * ranks.length), {
      type: 'bar',
      data: { labels: ranks.map(function (s) { return s.what; }),
        datasets: [{ label: 'ms per step on the path', backgroundColor: color(1), data: ranks.map(function (s) { return s.ms_per_step; }) }] },
      options: { indexAxis: 'y', plugins: { legend: { display: false } } }
    });
    table('On the critical path: ranks and ranges, kernels and collectives', ['what', 'ms per step', 'share of the path'],
      p.by_range.slice(0, 10).concat(p.by_item.slice(0, 10)).map(function (s) { return [s.what, fmt(s.ms_per_step, 2), fmt(100 * s.share, 1) + '%']; }));
  }

  function topLevel(data) {
    var ranks = presentRanks(data);
    var bars = rankBars(ranks);
    var names = {};
    ranks.forEach(function (r) { Object.keys(r.top_level_ms || {}).forEach(function (n) { names[n] = true; }); });
    var list = Object.keys(names).sort();
    if (!list.length) return;
    var host = data.device ? '; host wall time: on a GPU the host leaves a range at launch, see GPU time by range' : '';
    chart(panel('Time per top-level range', 'mean ms per step, collectives inside a range included' + host + bars.note, 1100, 300), {
      type: 'bar',
      data: {
        labels: bars.labels,
        datasets: list.map(function (n, i) {
          return { label: n, backgroundColor: color(i + 2), data: bars.values(function (r) { return (r.top_level_ms || {})[n] || 0; }) };
        })
      },
      options: { scales: { x: { stacked: true }, y: { stacked: true, title: { display: true, text: 'ms per step' } } } }
    });
  }

  // Chart.js has no heatmap; a plain canvas does: one cell per (rank bin, step bin).
  function heatmap(data) {
    var h = data.heatmap;
    if (!h || !h.values_ms.length) return;
    grid(h.rank_labels, h.step_labels, h.values_ms, { title: 'Step time, rank × step', row: 'rank', unit: 'ms', digits: 1,
      note: 'slowest step in each cell; darker is slower; hover for values' });
  }

  // MoE: tokens routed to each expert (all ranks) per step; a hot expert is a dark row.
  function expertLoad(data) {
    var x = data.expert_load;
    if (!x) return;
    if (x.balanced) document.getElementById('what-if').textContent += (document.getElementById('what-if').textContent ? ' · ' : '') +
      'What if routing were balanced: ' + x.balanced.text;
    if (x.experts && x.step_labels.length) {
      var labels = x.tokens.map(function (row, e) { return e + ' (' + fmt(100 * x.share[e], 0) + '%)'; });
      grid(labels, x.step_labels, x.tokens, { title: 'Tokens per expert, expert × step', row: 'expert', unit: 'tokens', digits: 0,
        id: 'expert-heatmap', note: 'tokens routed to each expert by all ranks (share of the window in brackets); darker is busier; imbalance max/mean ' + fmt(x.imbalance, 2) });
    }
    if (x.ranks.length && x.ranks.length <= 64) {
      table('Expert load per rank (' + fmt(x.ms_per_token * 1000, 3) + ' µs of expert time per token)', ['rank', 'ep group', 'tokens received per step', 'expert ms per step'],
        x.ranks.map(function (r) { return [r.rank, r.group, fmt(r.tokens_received, 0), fmt(r.experts_ms, 2)]; }));
    }
  }

  function grid(rowLabels, colLabels, values, o) {
    var h = { rank_labels: rowLabels, step_labels: colLabels, values_ms: values };
    var rows = h.values_ms.length, cols = h.step_labels.length;
    var left = 70, top = 10, w = 1000, hgt = Math.max(120, Math.min(600, rows * 18));
    var canvas = panel(o.title, o.note, left + w + 80, top + hgt + 40);
    if (o.id) canvas.id = o.id;
    var ctx = canvas.getContext('2d');
    var lo = Infinity, hi = -Infinity, cells = 0;
    h.values_ms.forEach(function (row) { row.forEach(function (v) { if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }); });
    var cw = w / cols, ch = hgt / rows;
    function shade(v) {
      var t = hi > lo ? (v - lo) / (hi - lo) : 0;
      var r = Math.round(247 - t * (247 - 8)), g = Math.round(251 - t * (251 - 48)), b = Math.round(255 - t * (255 - 107));
      return 'rgb(' + r + ',' + g + ',' + b + ')';
    }
    h.values_ms.forEach(function (row, i) {
      row.forEach(function (v, j) {
        ctx.fillStyle = v === null ? '#eeeeee' : shade(v);
        ctx.fillRect(left + j * cw, top + i * ch, Math.ceil(cw), Math.ceil(ch));
        if (v !== null) cells += 1;
      });
    });
    ctx.fillStyle = '#1d232b';
    ctx.font = '11px sans-serif';
    var every = Math.ceil(rows / Math.floor(hgt / 12));
    h.rank_labels.forEach(function (l, i) { if (i % every === 0) ctx.fillText(o.row + ' ' + l, 2, top + i * ch + ch / 2 + 4); });
    ctx.fillText('step ' + h.step_labels[0], left, top + hgt + 16);
    var last = 'step ' + h.step_labels[cols - 1];
    ctx.fillText(last, left + w - ctx.measureText(last).width, top + hgt + 16);
    ctx.fillText(fmt(lo, o.digits) + ' ' + o.unit, left + w + 8, top + hgt);
    ctx.fillText(fmt(hi, o.digits) + ' ' + o.unit, left + w + 8, top + 10);
    canvas.addEventListener('mousemove', function (e) {
      var r = canvas.getBoundingClientRect();
      var j = Math.floor((e.clientX - r.left - left) / cw), i = Math.floor((e.clientY - r.top - top) / ch);
      if (i >= 0 && i < rows && j >= 0 && j < cols) {
        canvas.title = o.row + ' ' + h.rank_labels[i] + ', step ' + h.step_labels[j] + ': ' + fmt(h.values_ms[i][j], 2) + ' ' + o.unit;
      }
    });
    state.charts += 1;
    state.points += cells;
  }

  function arrivals(data) {
    var d = data.step_detail;
    if (!d || !d.collectives.length) return;
    var labels = d.collectives.map(function (c) { return c.comm + ' ' + c.op + ' #' + c.seq + (c.range ? ' (' + c.range + ')' : ''); });
    var ranks = {};
    d.collectives.forEach(function (c) { c.ranks.forEach(function (r) { ranks[r.rank] = true; }); });
    var rankList = Object.keys(ranks).map(Number).sort(function (a, b) { return a - b; });
    var note = 'arrival relative to the last arriver (0 = last; negative = arrived early and waited), ms';
    if (rankList.length <= 16) {
      chart(panel('Arrival skew at the collectives of step ' + d.step, note), {
        type: 'bar',
        data: {
          labels: labels,
          datasets: rankList.map(function (rank, i) {
            return {
              label: 'rank ' + rank, backgroundColor: color(i),
              data: d.collectives.map(function (c) {
                var x = c.ranks.find(function (r) { return r.rank === rank; });
                return x ? x.arrival_rel_last_ms : null;
              })
            };
          })
        },
        options: { scales: { y: { title: { display: true, text: 'ms vs last arriver' } } } }
      });
    } else {
      var points = [];
      d.collectives.forEach(function (c, i) { c.ranks.forEach(function (r) { points.push({ x: i, y: r.arrival_rel_last_ms }); }); });
      chart(panel('Arrival skew at the collectives of step ' + d.step, note + '; one dot per rank'), {
        type: 'scatter',
        data: { datasets: [{ label: 'ranks', backgroundColor: color(0), pointRadius: 2, data: points }] },
        options: { scales: { x: { ticks: { callback: function (v) { return labels[v] || ''; } } }, y: { title: { display: true, text: 'ms vs last arriver' } } } }
      });
    }
  }

  function counters(data) {
    if (!data.counters || !data.counters.length) return;
    data.counters.forEach(function (c, k) {
      var ranks = data.ranks.filter(function (r) { return r.present && r.counters && r.counters[c.name] !== undefined; });
      var raw = ranks.map(function (r) { return r.counters[c.name]; });
      var scale = isBytes(c.name) ? byteScale(raw) : { div: 1, unit: 'per step' };
      var value = function (r) { return r.counters[c.name] / scale.div; };
      var note = 'mean per step, ' + scale.unit + '; imbalance (max/mean) ' + fmt(c.imbalance, 2);
      if (ranks.length > MANY) {
        histogram('Counter ' + c.name + ' over ' + ranks.length + ' ranks', note, ranks.map(value), c.name + ' (' + scale.unit + ')', k + 4);
        return;
      }
      chart(panel('Counter ' + c.name + ' per rank', note, 1100, 260), {
        type: 'bar',
        data: {
          labels: ranks.map(function (r) { return 'rank ' + r.rank; }),
          datasets: [{ label: c.name + ' (' + scale.unit + ')', backgroundColor: color(k + 4), data: ranks.map(value) }]
        },
        options: { plugins: { legend: { display: false } } }
      });
    });
  }

  function skew(data) {
    document.getElementById('summary').textContent = 'world size ' + data.world_size + ' · steps ' + data.steps.first + '–' +
      data.steps.last + ' · median step ' + fmt(data.step_ms_median, 2) + ' ms · ' + data.run_dir;
    findings(data.findings);
    belowNoise(data);
    if (data.what_if) document.getElementById('what-if').textContent = 'What if: ' + data.what_if.text;
    provenance(data.provenance);
    partialRanks(data);
    breakdown(data);
    gpuRanges(data);
    deviceAnalyses(data);
    criticalPath(data);
    topLevel(data);
    heatmap(data);
    expertLoad(data);
    arrivals(data);
    counters(data);
    groups(data);
    // The rank table lists every rank up to 64, else the 64 slowest by straggler score.
    var rows = presentRanks(data);
    var title = 'Ranks';
    if (rows.length > 64) { title = 'Ranks: the 64 slowest of ' + rows.length + ' by straggler score'; rows = slowestFirst(rows).slice(0, 64); }
    table(title, ['rank', 'steps', 'median ms', 'p90 ms', 'max ms', 'compute', 'wait', 'transfer', 'memcpy', 'idle', 'relative score', 'individual score'],
      rows.map(function (r) {
        var partial = (data.partial_ranks || []).some(function (p) { return p.rank === r.rank; });
        return [partial ? r.rank + ' (partial)' : r.rank, r.steps, fmt(r.step_ms.median, 2), fmt(r.step_ms.p90, 2), fmt(r.step_ms.max, 2), fmt(r.breakdown_ms.compute, 2),
          fmt(r.breakdown_ms.collective_wait, 2), fmt(r.breakdown_ms.collective_transfer, 2),
          fmt(r.breakdown_ms.memcpy || 0, 2), fmt(r.breakdown_ms.idle, 2),
          fmt(r.straggler_score.relative, 3), fmt(r.straggler_score.individual, 3)];
      }));
    problems(data.problems);
  }

  // --- scaling ---

  function scaling(data) {
    var pts = data.points;
    // attention: naive | flash | unknown (runs older than run.json model.attention) | mixed (...)
    document.getElementById('summary').textContent = pts.length + ' points, T = ' + pts.map(function (p) { return p.seq_len; }).join(', ') +
      ' · attention ' + (data.attention || 'unknown') +
      (typeof data.memory_exponent === 'number' ? ' · memory grows as T^' + fmt(data.memory_exponent, 1) : '') +
      ' · ' + data.sweep_dir;
    findings(data.findings);
    var shown = data.ranges.filter(function (r) { return r.aggregated || !/\/block\d+(\/|$)/.test(r.name); });
    var datasets = shown.map(function (r, i) {
      return {
        label: r.name, borderColor: color(i), backgroundColor: color(i), showLine: true, fill: false,
        data: r.times_ms.map(function (t, k) { return t === null || t <= 0 ? null : { x: pts[k].seq_len, y: t }; }).filter(function (p) { return p !== null; })
      };
    });
    chart(panel('Time per step vs sequence length T (log-log)', 'slope 1 = linear in T, slope 2 = quadratic; ms in the fastest step, median over ranks', 1100, 460), {
      type: 'scatter',
      data: { datasets: datasets },
      options: {
        scales: {
          x: { type: 'logarithmic', title: { display: true, text: 'T (tokens)' } },
          y: { type: 'logarithmic', title: { display: true, text: 'ms per step' } }
        }
      }
    });
    chart(panel('Throughput vs T', 'tokens per second over the whole job', 1100, 280), {
      type: 'scatter',
      data: { datasets: [{ label: 'tokens/s', showLine: true, borderColor: color(0), backgroundColor: color(0),
        data: pts.map(function (p) { return { x: p.seq_len, y: p.tokens_per_s }; }) }] },
      options: { scales: { x: { type: 'logarithmic', title: { display: true, text: 'T (tokens)' } }, y: { title: { display: true, text: 'tokens/s' } } } }
    });
    table('Points', ['T', 'step ms', 'tokens/s', 'peak memory MiB', 'attention share (FLOPs)', 'attention share (measured)'],
      pts.map(function (p) {
        return [p.seq_len, fmt(p.step_ms, 2), fmt(p.tokens_per_s, 0), p.peak_mem_bytes === null ? '–' : fmt(p.peak_mem_bytes / 1048576, 1),
          p.attention_share_flops === null ? '–' : fmt(100 * p.attention_share_flops, 0) + '%',
          p.attention_share_measured === null ? '–' : fmt(100 * p.attention_share_measured, 0) + '%'];
      }));
    table('Fits t(T) = c + aT + bT²', ['range', 'c ms', 'a ms/token', 'b ms/token²', 'R²', 'slopes', 'crossover T*'],
      shown.map(function (r) {
        return [r.name, fmt(r.c, 3), Number(r.a).toExponential(2), Number(r.b).toExponential(2), fmt(r.r2, 4),
          r.slopes.map(function (s) { return fmt(s, 2); }).join(' → '), r.crossover_T === null ? '–' : fmt(r.crossover_T, 0)];
      }));
    problems(data.problems);
  }

  // --- startup ---

  function startup(data) {
    var ranks = data.ranks.filter(function (r) { return r.readable; });
    document.getElementById('summary').textContent = data.world_size + ' ranks · median time to the first step ' +
      (data.median_to_first_step_s === null ? '–' : fmt(data.median_to_first_step_s, 2) + ' s') + ' · ' + data.run_dir;
    var ol = document.getElementById('finding-list');
    if (!data.findings.length) ol.appendChild(el('li', {}, 'No findings.'));
    data.findings.forEach(function (f) {
      var li = el('li');
      if (f.kind === 'late_rank') li.appendChild(el('span', { 'class': 'cost' }, fmt(f.cost_ms / 1000, 1) + ' s late'));
      li.appendChild(el('span', { 'class': 'kind' }, f.kind));
      li.appendChild(document.createTextNode(f.text));
      ol.appendChild(li);
    });
    var names = [];
    ranks.forEach(function (r) { r.phases.forEach(function (p) { if (names.indexOf(p.name) < 0) names.push(p.name); }); });
    var large = ranks.length > 64;
    chart(panel('Start-up phases per rank', 'seconds in each init/* phase (init/model includes init/checkpoint)', 1100, large ? 320 : Math.max(220, 28 * ranks.length)), {
      type: 'bar',
      data: {
        labels: ranks.map(function (r) { return 'rank ' + r.rank; }),
        datasets: names.map(function (n, i) {
          return { label: n, backgroundColor: color(i), data: ranks.map(function (r) {
            var p = r.phases.filter(function (q) { return q.name === n; })[0];
            return p ? p.ms / 1000 : 0;
          }) };
        })
      },
      options: { indexAxis: large ? 'x' : 'y', scales: { x: { stacked: true }, y: { stacked: true } } }
    });
    // The rank table lists every rank up to 64, else the 64 slowest by straggler score.
    var rows = presentRanks(data);
    var title = 'Ranks';
    if (rows.length > 64) { title = 'Ranks: the 64 slowest of ' + rows.length + ' by straggler score'; rows = slowestFirst(rows).slice(0, 64); }
    table(title, ['rank', 'launch s', 'first step at s', 'to first step s', 'slowest phase', 'its ms'],
      data.ranks.map(function (r) {
        return r.readable ? [r.rank, fmt(r.launch_at_s, 2), r.first_step_at_s === null ? '–' : fmt(r.first_step_at_s, 2),
          r.to_first_step_s === null ? '–' : fmt(r.to_first_step_s, 2), r.slowest_phase, fmt(r.slowest_phase_ms, 0)]
          : [r.rank, '–', '–', '–', r.problem, '–'];
      }));
    problems(data.problems);
  }

  // --- diff ---

  function diff(data) {
    document.getElementById('summary').textContent = 'BASE ' + data.base.run_dir + ' (' + fmt(data.base.step_ms_median, 1) +
      ' ms a step) · NEW ' + data.new.run_dir + ' (' + fmt(data.new.step_ms_median, 1) + ' ms) · noise ' + fmt(data.noise_ms, 1) + ' ms';
    var ol = document.getElementById('finding-list');
    ol.appendChild(el('li', {}, data.headline));
    data.explanations.forEach(function (e) { ol.appendChild(el('li', {}, e)); });
    if (data.unexplained && data.unexplained.parts.length && Math.abs(data.unexplained.ms) >= 0.01)
      ol.appendChild(el('li', {}, 'left unexplained: ' + (data.unexplained.ms > 0 ? '+' : '') + fmt(data.unexplained.ms, 2) + ' ms of the ' +
        (data.mean_delta_ms > 0 ? '+' : '') + fmt(data.mean_delta_ms, 2) + ' ms, in parts with no cause found (' + data.unexplained.parts.join(', ') + ')'));
    var parts = data.waterfall;
    // The waterfall: BASE's mean step, each part's change floating from where the last one ended, NEW.
    var labels = ['BASE'], bars = [[0, data.base.mean_step_ms]], colors = [color(0)];
    var at = data.base.mean_step_ms;
    parts.forEach(function (p) {
      labels.push(p.name);
      bars.push([at, at + p.delta_ms]);
      colors.push(p.delta_ms > 0 ? '#e15759' : '#59a14f');
      at += p.delta_ms;
    });
    labels.push('NEW');
    bars.push([0, data.new.mean_step_ms]);
    colors.push(color(0));
    chart(panel('Where the mean step\'s change went', 'ms per step: BASE, each part\'s change (red slower, green faster), NEW; the parts add up', 1100, 360), {
      type: 'bar',
      data: { labels: labels, datasets: [{ label: 'ms per step', data: bars, backgroundColor: colors }] },
      options: { plugins: { legend: { display: false } } }
    });
    chart(panel('Each part in both runs', 'mean ms per step, over the ranks', 1100, Math.max(220, 34 * parts.length)), {
      type: 'bar',
      data: { labels: parts.map(function (p) { return p.name; }), datasets: [
        { label: 'BASE', backgroundColor: color(0), data: parts.map(function (p) { return p.base_ms; }) },
        { label: 'NEW', backgroundColor: color(1), data: parts.map(function (p) { return p.new_ms; }) }] },
      options: { indexAxis: 'y' }
    });
    table('Waterfall', ['part', 'BASE ms', 'NEW ms', 'change ms', 'cause'], parts.map(function (p) {
      return [p.name, fmt(p.base_ms, 2), fmt(p.new_ms, 2), (p.delta_ms > 0 ? '+' : '') + fmt(p.delta_ms, 2), p.cause === null ? '' : p.cause];
    }));
    // Ranks by rank or by role (only in reports that have them: 'ranks' came within schema 2).
    if (data.ranks && data.ranks.roles && data.ranks.roles.length > 1) {
      var list = function (ranks) { return ranks.length > 8 ? ranks.slice(0, 8).join(',') + ',... (' + ranks.length + ')' : ranks.join(','); };
      var roles = data.ranks.roles.slice(0, 64);
      table((data.ranks.match === 'role' ? 'Roles' : 'Ranks') + (data.ranks.roles.length > 64 ? ': the 64 that changed most' : '') + ' — ' + data.ranks.how,
        data.ranks.match === 'role' ? ['role', 'BASE ranks', 'NEW ranks', 'BASE ms', 'NEW ms', 'change ms'] : ['rank', 'BASE ms', 'NEW ms', 'change ms'],
        roles.map(function (d) {
          var change = (d.delta_ms > 0 ? '+' : '') + fmt(d.delta_ms, 2);
          return data.ranks.match === 'role' ? [d.role, list(d.base_ranks), list(d.new_ranks), fmt(d.base_ms, 2), fmt(d.new_ms, 2), change]
            : [d.role, fmt(d.base_ms, 2), fmt(d.new_ms, 2), change];
        }));
    }
    if (data.settings.length)
      table('Settings that differ', ['setting', 'BASE', 'NEW'], data.settings.map(function (x) { return [x.key, x.base || '(absent)', x.new || '(absent)']; }));
    problems(data.problems);
  }

  // hangdoctor's verdict (kind rankscope.hang: its JSON report, schema_version 2). With several
  // artifacts (dumps, a log, stacks) it shows what each said and, per culprit, the evidence on both
  // sides; the ranks table holds the culprits first, then up to 64 others.
  function hang(page) {
    var data = page.hang;
    var culprits = data.culprit_ranks || [];
    document.getElementById('summary').textContent = data.verdict.toUpperCase() + (data.kind ? ' (' + data.kind.replace(/_/g, ' ') + ')' : '') +
      (data.world_size ? ' — ' + data.world_size + ' ranks' : '') + (culprits.length ? '; culprit ranks ' + culprits.join(',') : '');
    var ol = document.getElementById('finding-list');
    ol.appendChild(el('li', { 'class': 'headline' }, data.headline));
    if (data.explanation) ol.appendChild(el('li', {}, data.explanation));
    var joined = data.joined;
    if (joined) {
      (joined.disagreements || []).forEach(function (d) { ol.appendChild(el('li', { 'class': 'caveat' }, 'The artifacts disagree: ' + d)); });
      table('What each artifact said', ['artifact', 'verdict', 'culprit ranks', 'its headline'], joined.artifacts.map(function (a) {
        return [a.artifact, a.verdict + (a.kind ? ' (' + a.kind.replace(/_/g, ' ') + ')' : ''), a.culprit_ranks.join(',') || '–', a.headline];
      }), 'text');
      joined.culprits.forEach(function (c) {
        table('Evidence for rank ' + c.rank, ['artifact', 'blames it', 'what it says of rank ' + c.rank], c.evidence.map(function (e) {
          return [e.artifact, e.blames ? 'yes' : 'no', e.says];
        }), 'text');
      });
    }
    var isCulprit = function (r) { return culprits.indexOf(r.rank) >= 0; };
    var ranks = (data.ranks || []).filter(isCulprit).concat((data.ranks || []).filter(function (r) { return !isCulprit(r); }).slice(0, 64));
    var where = function (r) {
      if (r.op) return r.op + ' #' + r.seq + ' on ' + r.comm + (r.waited_s != null ? (data.times_are_lower_bounds ? ' for at least ' : ' for ') +
        (r.waited_s < 1 ? fmt(r.waited_s * 1000, 0) + ' ms' : fmt(r.waited_s, 1) + ' s') : '');
      return r.range || '';
    };
    table('Ranks' + (data.ranks && data.ranks.length > ranks.length ? ' (culprits, then 64 of the ' + (data.ranks.length - culprits.length) + ' others)' : ''),
      ['rank', 'culprit', 'state', 'where', 'host', 'note'], ranks.map(function (r) {
        return [r.rank, isCulprit(r) ? 'yes' : '', r.state, where(r), r.host || '', r.note || ''];
      }), 'text');
    if (data.log && data.log.findings && data.log.findings.length)
      table('From the log', ['ranks', 'kind', 'what it printed', 'where'], data.log.findings.map(function (f) {
        return [f.ranks.join(','), f.kind.replace(/_/g, ' '), f.text, f.evidence];
      }), 'text');
    if (data.stacks && data.stacks.ranks && data.stacks.ranks.length)
      table('Stacks: ' + data.stacks.summary, ['rank', 'where', 'own frame', 'call', 'snapshots', 'moved'], data.stacks.ranks.slice(0, 128).map(function (r) {
        return [r.rank, r.where, r.own_frame || '', r.call || '', r.snapshots, r.moved ? 'yes' : 'no'];
      }), 'text');
    problems(data.problems);
  }

  try {
    var data = JSON.parse(document.getElementById('rankscope-data').textContent);
    if (data.kind === 'rankscope.skew') skew(data);
    else if (data.kind === 'rankscope.scaling') scaling(data);
    else if (data.kind === 'rankscope.startup') startup(data);
    else if (data.kind === 'rankscope.diff') diff(data);
    else if (data.kind === 'rankscope.hang') hang(data);
    else throw new Error('unknown report kind ' + data.kind);
    body.setAttribute('data-rankscope-rendered', 'yes');
  } catch (e) {
    state.errors.push(String(e && e.stack || e));
    body.setAttribute('data-rankscope-rendered', 'failed');
  }
  mark();
})();
