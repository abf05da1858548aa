/**
 * The live dashboard's page: HTML, CSS and a dependency-free script that polls `dashboard/data`
 * every second and draws hand-written SVG charts. Served as three same-origin files so that a
 * strict Content-Security-Policy (no inline script or style) holds.
 * @module
 */

/** `GET /dashboard`. Asset and data URLs are relative to it. */
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Cohort · live dashboard</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="dashboard/app.css">
<script src="dashboard/app.js" defer></script>
</head>
<body>
<header>
  <div class="brand"><span class="logo" aria-hidden="true"></span>Cohort <span class="sub">live dashboard</span></div>
  <div id="mode" class="badge" data-testid="mode">connecting…</div>
  <div class="spacer"></div>
  <div id="status" class="status" data-testid="status"><span class="dot"></span><span id="status-text">connecting…</span></div>
</header>
<main>
  <section class="kpis" id="kpis" aria-label="selected model"></section>
  <section class="panel models">
    <table id="models" data-testid="models"><thead><tr>
      <th>model</th><th class="n">req/s</th><th class="n">p50</th><th class="n">p99</th><th class="n">items/s</th>
      <th class="n">mean batch</th><th class="n">queued</th><th class="n">shed/s</th><th class="n">errors/s</th><th class="n">requests</th>
    </tr></thead><tbody></tbody></table>
  </section>
  <section class="grid">
    <div class="panel card"><div class="card-head"><h2>Throughput <small>req/s per model</small></h2><div class="legend" id="legend-rps"></div></div><div class="chart-host" id="chart-rps"></div></div>
    <div class="panel card"><div class="card-head"><h2>Latency <small id="lat-model"></small></h2><div class="legend" id="legend-lat"></div></div><div class="chart-host" id="chart-lat"></div></div>
    <div class="panel card"><div class="card-head"><h2>Queue depth <small>items waiting per model</small></h2><div class="legend" id="legend-queue"></div></div><div class="chart-host" id="chart-queue"></div></div>
    <div class="panel card"><div class="card-head"><h2>Batch sizes <small id="batch-caption"></small></h2><div class="legend" id="batch-total"></div></div><div class="chart-host" id="chart-batch"></div></div>
    <div class="panel card"><div class="card-head"><h2>Dispatch &amp; shedding <small id="dispatch-caption"></small></h2></div><div class="card-body" id="dispatch"></div></div>
    <div class="panel card"><div class="card-head"><h2>Workers <small id="workers-caption"></small></h2></div><div class="card-body scroll" id="workers"></div></div>
  </section>
</main>
</body>
</html>
`

/** `GET /dashboard/app.css`. */
export const DASHBOARD_CSS = `:root {
  --bg: #0d1117; --panel: #161b22; --line: #2a3340; --grid: #222b36; --text: #e6edf3; --muted: #8b98a9;
  --accent: #4cc9f0; --good: #3fb950; --bad: #f85149;
}
* { box-sizing: border-box; }
html, body { margin: 0; background: var(--bg); color: var(--text); }
body { font: 13px/1.4 "Inter", "Segoe UI", "Helvetica Neue", "Liberation Sans", "DejaVu Sans", Arial, sans-serif; }
header { display: flex; align-items: center; gap: 14px; padding: 10px 20px; border-bottom: 1px solid var(--line); background: #10151c; }
.brand { font-size: 17px; font-weight: 700; letter-spacing: .2px; display: flex; align-items: center; gap: 8px; }
.brand .sub { font-weight: 400; color: var(--muted); font-size: 14px; }
.logo { width: 18px; height: 18px; border-radius: 5px; background: linear-gradient(135deg, #4cc9f0, #7b2ff7); display: inline-block; }
.badge { border: 1px solid var(--line); border-radius: 999px; padding: 2px 10px; color: var(--muted); font-size: 12px; }
.spacer { flex: 1; }
.status { display: flex; align-items: center; gap: 8px; color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums; }
.status .dot { width: 9px; height: 9px; border-radius: 50%; background: var(--muted); }
.status.live .dot { background: var(--good); box-shadow: 0 0 0 3px rgba(63, 185, 80, .2); }
.status.down .dot { background: var(--bad); box-shadow: 0 0 0 3px rgba(248, 81, 73, .2); }
main { padding: 12px 20px 16px; display: flex; flex-direction: column; gap: 12px; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; }
.kpis { display: grid; grid-template-columns: 1.3fr repeat(6, 1fr); gap: 12px; }
.kpi { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px; min-width: 0; }
.kpi .label { color: var(--muted); font-size: 11px; text-transform: uppercase; letter-spacing: .6px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.kpi .value { font-size: 22px; font-weight: 650; font-variant-numeric: tabular-nums; white-space: nowrap; }
.kpi .value small { font-size: 12px; color: var(--muted); font-weight: 400; margin-left: 3px; }
.kpi.model .value { font-size: 18px; overflow: hidden; text-overflow: ellipsis; }
.kpi.model .value .swatch { width: 10px; height: 10px; }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 12px; text-align: left; white-space: nowrap; }
th { color: var(--muted); font-weight: 500; font-size: 11px; text-transform: uppercase; letter-spacing: .5px; border-bottom: 1px solid var(--line); }
td.n, th.n { text-align: right; }
.models tbody tr { cursor: pointer; }
.models tbody tr:hover { background: #1c2430; }
.models tbody tr.sel { background: #1d2a3a; }
.models tbody tr.sel td:first-child { box-shadow: inset 3px 0 0 var(--accent); }
.swatch { display: inline-block; width: 9px; height: 9px; border-radius: 2px; margin-right: 7px; vertical-align: 0; }
.grid { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 12px; }
.card { padding: 10px 12px 8px; min-width: 0; display: flex; flex-direction: column; }
.card-head { display: flex; align-items: baseline; gap: 10px; min-height: 20px; }
.card h2 { margin: 0; font-size: 13px; font-weight: 600; white-space: nowrap; }
.card h2 small { color: var(--muted); font-weight: 400; margin-left: 4px; }
.legend { margin-left: auto; display: flex; gap: 10px; color: var(--muted); font-size: 11px; white-space: nowrap; overflow: hidden; }
.legend b { color: var(--text); font-weight: 600; font-variant-numeric: tabular-nums; }
.chart-host { height: 226px; margin-top: 4px; }
.card-body { height: 226px; margin-top: 6px; }
.card-body.scroll { overflow: auto; }
svg.chart { display: block; overflow: visible; }
svg .grid { stroke: var(--grid); stroke-width: 1; }
svg .axis { stroke: var(--line); stroke-width: 1; }
svg text { fill: var(--muted); font-size: 10px; font-variant-numeric: tabular-nums; }
svg text.val { fill: var(--text); font-size: 10px; }
.empty { color: var(--muted); display: flex; align-items: center; justify-content: center; height: 100%; text-align: center; padding: 0 16px; }
.tallies { display: grid; grid-template-columns: 1fr 1fr; gap: 18px; }
.tally { min-width: 0; }
.stack { display: flex; height: 12px; border-radius: 4px; overflow: hidden; background: #0f141a; margin: 4px 0 10px; }
.stack > div { height: 100%; }
.rows { display: grid; grid-template-columns: 1fr auto auto; gap: 5px 10px; align-items: center; font-variant-numeric: tabular-nums; }
.rows > span { white-space: nowrap; }
.rows .h { color: var(--muted); font-size: 11px; text-transform: uppercase; letter-spacing: .5px; }
.rows .n { text-align: right; }
table.workers th, table.workers td { padding: 4px 6px; }
table.workers th:first-child, table.workers td:first-child { padding-left: 0; }
table.workers tr.wk td { padding-top: 8px; color: var(--text); }
table.workers tr.note td { padding-top: 0; color: var(--muted); font-size: 11px; padding-left: 17px; white-space: normal; }
table.workers .wid { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; }
table.workers .state { margin-left: 8px; font-size: 11px; border: 1px solid var(--line); border-radius: 999px; padding: 0 7px; }
.bar { position: relative; height: 8px; width: 72px; border-radius: 4px; background: #0f141a; overflow: hidden; }
.bar > div { position: absolute; left: 0; top: 0; bottom: 0; border-radius: 4px; }
.muted { color: var(--muted); }
.ok { color: var(--good); }
.notready { color: var(--bad); }
`

/** `GET /dashboard/app.js`: no modules, no dependencies, no template literals (kept in a TS string). */
export const DASHBOARD_JS = String.raw`(function () {
  'use strict'
  var POLL_MS = 1000
  var MAX_SPAN_MS = 120000
  var MIN_SPAN_MS = 30000
  var SVGNS = 'http://www.w3.org/2000/svg'
  var COLORS = ['#4cc9f0', '#f72585', '#90be6d', '#f9c74f', '#b388ff', '#ff8c42', '#43aa8b', '#f94144']
  var REASONS = { idle: '#4cc9f0', full: '#90be6d', deadline: '#f9c74f', timer: '#b388ff' }
  var SHEDS = { overloaded: '#f94144', admission: '#e76f51', deadline: '#f9c74f', doomed: '#ff8c42', cancelled: '#8d99ae', closed: '#6c757d' }
  var data = null
  var selected = decodeURIComponent(location.hash.slice(1)) || null
  var lastOk = 0

  // ---- DOM helpers (no innerHTML: model names and worker ids come from the network) ----
  function setAttrs(e, attrs) {
    for (var k in attrs || {}) {
      var v = attrs[k]
      if (v === undefined || v === null || v === false) continue
      if (k === 'text') e.textContent = String(v)
      else if (k === 'onclick') e.addEventListener('click', v)
      else if (k === 'style') Object.assign(e.style, v)
      else e.setAttribute(k, String(v))
    }
  }
  function append(e, children) {
    for (var i = 0; i < children.length; i++) {
      var c = children[i]
      if (c === null || c === undefined || c === false) continue
      if (Array.isArray(c)) append(e, c)
      else e.append(c instanceof Node ? c : document.createTextNode(String(c)))
    }
  }
  function el(tag, attrs) {
    var e = document.createElement(tag)
    setAttrs(e, attrs)
    append(e, Array.prototype.slice.call(arguments, 2))
    return e
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag)
    setAttrs(e, attrs)
    append(e, Array.prototype.slice.call(arguments, 2))
    return e
  }
  function $(id) { return document.getElementById(id) }
  function swatch(color) { return el('span', { class: 'swatch', style: { background: color } }) }
  function empty(host, text) { host.replaceChildren(el('div', { class: 'empty', text: text })) }

  // ---- number formats ----
  function ok(v) { return v !== null && v !== undefined && isFinite(v) }
  function fmtRate(v) {
    if (!ok(v)) return '–'
    if (v === 0) return '0'
    if (v >= 100) return Math.round(v).toLocaleString('en-US')
    if (v >= 10) return v.toFixed(1)
    return v.toFixed(2)
  }
  function fmtMs(v) {
    if (!ok(v)) return '–'
    if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 1 : 2) + ' s'
    if (v >= 100) return v.toFixed(0) + ' ms'
    if (v >= 10) return v.toFixed(1) + ' ms'
    return v.toFixed(2) + ' ms'
  }
  function fmtInt(v) { return ok(v) ? Math.round(v).toLocaleString('en-US') : '–' }
  function fmtAxis(v) {
    if (v >= 1e6) return +(v / 1e6).toFixed(1) + 'M'
    if (v >= 1e3) return +(v / 1e3).toFixed(1) + 'k'
    return String(+v.toPrecision(3))
  }
  function fmtMsAxis(v) { return v === 0 ? '0' : v >= 1000 ? +(v / 1000).toPrecision(3) + ' s' : +v.toPrecision(3) + ' ms' }

  /** A y scale of 3 to 5 round steps covering max. */
  function scale(max, integer) {
    var raw = Math.max(max, integer ? 1 : 1e-9) / 5
    var e = Math.pow(10, Math.floor(Math.log10(raw)))
    var f = raw / e
    var step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * e
    if (integer) step = Math.max(1, Math.round(step))
    if (!(max > 0)) return { max: integer ? 4 : 1, step: integer ? 1 : 0.25 }
    return { max: Math.ceil(max / step - 1e-9) * step, step: step }
  }
  function colorOf(name) {
    var i = data ? data.models.findIndex(function (m) { return m.name === name }) : 0
    return COLORS[(i < 0 ? 0 : i) % COLORS.length]
  }

  // ---- charts (hand-written SVG) ----
  function yGrid(root, m, W, ih, sc, fmt) {
    for (var v = 0; v <= sc.max + sc.step / 2; v += sc.step) {
      var yy = m.t + ih - (v / sc.max) * ih
      root.append(svg('line', { x1: m.l, x2: W - m.r, y1: yy, y2: yy, class: v === 0 ? 'axis' : 'grid' }))
      root.append(svg('text', { x: m.l - 6, y: yy + 3.5, 'text-anchor': 'end', text: fmt(v) }))
    }
  }

  /** Time series: opt.series = [{ name, color, points: [{ t, v }], area, width }]. */
  function lineChart(host, opt) {
    var W = Math.max(160, host.clientWidth), H = Math.max(80, host.clientHeight)
    var m = { l: 46, r: 8, t: 8, b: 18 }
    var iw = W - m.l - m.r, ih = H - m.t - m.b
    var t1 = opt.t1
    var oldest = t1
    opt.series.forEach(function (s) { if (s.points.length && s.points[0].t < oldest) oldest = s.points[0].t })
    // The span grows with the history the gateway holds, from 30 s up to 2 min.
    var span = Math.min(MAX_SPAN_MS, Math.max(MIN_SPAN_MS, Math.ceil((t1 - oldest) / 10000) * 10000))
    var t0 = t1 - span
    var max = 0
    opt.series.forEach(function (s) { s.points.forEach(function (p) { if (ok(p.v) && p.t >= t0 && p.v > max) max = p.v }) })
    var sc = scale(max * 1.05, opt.integer)
    function x(t) { return m.l + ((t - t0) / span) * iw }
    function y(v) { return m.t + ih - (v / sc.max) * ih }
    var root = svg('svg', { class: 'chart', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'data-testid': opt.testid, 'data-max': max })
    yGrid(root, m, W, ih, sc, opt.yFmt)
    var tick = span > 60000 ? 30 : 10
    for (var s = 0; s <= span / 1000; s += tick) {
      root.append(svg('text', { x: x(t1 - s * 1000), y: H - 4, 'text-anchor': s === 0 ? 'end' : s >= span / 1000 ? 'start' : 'middle', text: s === 0 ? 'now' : '−' + s + ' s' }))
    }
    opt.series.forEach(function (ser) {
      var d = '', pen = false, first = null, lastP = null, gaps = false
      ser.points.forEach(function (p) {
        if (p.t < t0 || !ok(p.v)) { if (pen) gaps = true; pen = false; return }
        d += (pen ? 'L' : 'M') + x(p.t).toFixed(1) + ',' + y(p.v).toFixed(1)
        pen = true
        if (!first) first = p
        lastP = p
      })
      if (ser.area && first && lastP && first !== lastP && !gaps) {
        root.append(svg('path', { d: d + 'L' + x(lastP.t).toFixed(1) + ',' + y(0) + 'L' + x(first.t).toFixed(1) + ',' + y(0) + 'Z', fill: ser.color, 'fill-opacity': 0.13, stroke: 'none' }))
      }
      if (d) root.append(svg('path', { d: d, fill: 'none', stroke: ser.color, 'stroke-width': ser.width || 2, 'stroke-linejoin': 'round', 'stroke-linecap': 'round' }))
      if (lastP) root.append(svg('circle', { cx: x(lastP.t), cy: y(lastP.v), r: 3, fill: ser.color }))
    })
    if (!opt.series.some(function (ser) { return ser.points.length > 0 })) {
      root.append(svg('text', { x: m.l + iw / 2, y: m.t + ih / 2, 'text-anchor': 'middle', text: 'collecting samples…' }))
    }
    host.replaceChildren(root)
  }

  /** Vertical bars with their counts on top: bars = [{ label, value }]. */
  function barChart(host, bars, opt) {
    var W = Math.max(160, host.clientWidth), H = Math.max(80, host.clientHeight)
    var m = { l: 40, r: 6, t: 14, b: 30 }
    var iw = W - m.l - m.r, ih = H - m.t - m.b
    var max = 0
    bars.forEach(function (b) { if (b.value > max) max = b.value })
    var sc = scale(max, true)
    var root = svg('svg', {
      class: 'chart', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'data-testid': opt.testid,
      'data-counts': bars.map(function (b) { return b.value }).join(','),
      'data-total': bars.reduce(function (a, b) { return a + b.value }, 0),
    })
    yGrid(root, m, W, ih, sc, fmtAxis)
    var bw = iw / Math.max(1, bars.length)
    bars.forEach(function (b, k) {
      var h = (b.value / sc.max) * ih
      var cx = m.l + k * bw + bw / 2
      root.append(svg('rect', { x: cx - bw * 0.36, y: m.t + ih - h, width: bw * 0.72, height: Math.max(h, b.value > 0 ? 1 : 0), rx: 2, fill: opt.color, 'fill-opacity': 0.85, 'data-testid': 'batch-bar', 'data-count': b.value }))
      if (b.value > 0) root.append(svg('text', { x: cx, y: m.t + ih - h - 3, 'text-anchor': 'middle', class: 'val', text: fmtAxis(b.value) }))
      root.append(svg('text', { x: cx, y: H - 16, 'text-anchor': 'middle', text: b.label }))
    })
    root.append(svg('text', { x: m.l + iw / 2, y: H - 2, 'text-anchor': 'middle', text: 'items per batch' }))
    host.replaceChildren(root)
  }

  function legend(host, items) {
    host.replaceChildren.apply(host, items.map(function (it) {
      return el('span', null, swatch(it.color), it.name + ' ', el('b', { text: it.value }))
    }))
  }

  // ---- selection ----
  function pick() {
    if (selected && data.models.some(function (m) { return m.name === selected })) return selected
    var best = null
    data.models.forEach(function (m) { if (!best || m.totals.requests > best.totals.requests) best = m })
    return best ? best.name : null
  }
  function select(name) {
    selected = name
    history.replaceState(null, '', '#' + encodeURIComponent(name))
    render()
  }
  function points(model, key) {
    return model.series.t.map(function (t, i) { return { t: t, v: model.series[key][i] } })
  }

  // ---- sections ----
  function renderKpis(m) {
    var c = m ? m.current : null
    function kpi(label, value, unit, testid, extra, raw) {
      return el('div', { class: 'kpi' + (extra ? ' ' + extra : '') },
        el('div', { class: 'label', text: label }),
        el('div', { class: 'value', 'data-testid': testid, 'data-value': raw }, value, unit ? el('small', { text: unit }) : null))
    }
    function split(s) { var i = s.lastIndexOf(' '); return i < 0 ? [s, ''] : [s.slice(0, i), s.slice(i + 1)] }
    var p50 = split(fmtMs(c && c.p50Ms)), p99 = split(fmtMs(c && c.p99Ms))
    $('kpis').replaceChildren(
      kpi('model · last ' + data.currentS + ' s', m ? [swatch(colorOf(m.name)), m.name] : '–', '', 'kpi-model', 'model'),
      kpi('throughput', fmtRate(c && c.rps), 'req/s', 'kpi-rps', '', c && c.rps),
      kpi('latency p50', p50[0], p50[1], 'kpi-p50', '', c && c.p50Ms),
      kpi('latency p99', p99[0], p99[1], 'kpi-p99', '', c && c.p99Ms),
      kpi('mean batch', c && ok(c.meanBatch) ? c.meanBatch.toFixed(1) : '–', 'items', 'kpi-batch', '', c && c.meanBatch),
      kpi('queued', fmtInt(c && c.queueDepth), 'items', 'kpi-queue', '', c && c.queueDepth),
      kpi('shed', data.workerMetrics ? fmtRate(c && c.shedPerS) : '–', data.workerMetrics ? '/s' : '', 'kpi-shed', '', c && c.shedPerS))
  }

  function renderModels(sel) {
    var body = $('models').tBodies[0]
    body.replaceChildren.apply(body, data.models.map(function (m) {
      var c = m.current
      return el('tr', { class: m.name === sel ? 'sel' : '', 'data-model': m.name, title: 'show ' + m.name, onclick: function () { select(m.name) } },
        el('td', null, swatch(colorOf(m.name)), m.name),
        el('td', { class: 'n', 'data-testid': 'model-rps', 'data-model': m.name, text: fmtRate(c.rps) }),
        el('td', { class: 'n', text: fmtMs(c.p50Ms) }),
        el('td', { class: 'n', text: fmtMs(c.p99Ms) }),
        el('td', { class: 'n', text: data.workerMetrics ? fmtRate(c.itemsPerS) : '–' }),
        el('td', { class: 'n', text: ok(c.meanBatch) ? c.meanBatch.toFixed(1) : '–' }),
        el('td', { class: 'n', text: fmtInt(c.queueDepth) }),
        el('td', { class: 'n', text: data.workerMetrics ? fmtRate(c.shedPerS) : '–' }),
        el('td', { class: 'n', text: fmtRate(c.errorsPerS) }),
        el('td', { class: 'n', 'data-testid': 'model-requests', 'data-model': m.name, text: fmtInt(m.totals.requests) }))
    }))
  }

  function bucketLabel(buckets, i) {
    var hi = buckets[i].le
    if (!ok(hi)) return '>' + (i > 0 ? buckets[i - 1].le : 0)
    var lo = i === 0 ? 1 : Math.floor(buckets[i - 1].le) + 1
    return lo >= hi ? String(hi) : lo + '–' + hi
  }

  function renderBatch(m) {
    var host = $('chart-batch')
    $('batch-caption').textContent = m ? m.name + ' · last ' + data.windowS + ' s' : ''
    var batches = m ? m.totals.batches : 0
    $('batch-total').replaceChildren(
      el('span', null, 'batches ', el('b', { 'data-testid': 'batches-total', text: fmtInt(batches) })),
      el('span', null, 'mean ', el('b', { text: m && ok(m.current.meanBatch) ? m.current.meanBatch.toFixed(1) : '–' })))
    if (!data.workerMetrics) {
      return empty(host, 'The batch-size histogram is a worker metric: in distributed mode scrape each worker’s --metrics-port /metrics (counts and means above come from $SRV.STATS).')
    }
    var win = m ? m.batchSizes.window : []
    var total = m ? m.batchSizes.total : []
    var maxBatch = 0
    data.workers.forEach(function (w) { w.models.forEach(function (x) { if (m && x.name === m.name && x.maxBatchSize > maxBatch) maxBatch = x.maxBatchSize }) })
    // Buckets up to the one holding the model's max batch size (or the largest batch seen).
    var n = Math.min(total.length, 4)
    total.forEach(function (b, i) {
      if (b.count > 0 || win[i].count > 0) n = Math.max(n, i + 1)
      if (ok(b.le) && (i === 0 || total[i - 1].le < maxBatch)) n = Math.max(n, i + 1)
    })
    var bars = []
    for (var i = 0; i < Math.min(n, win.length); i++) bars.push({ label: bucketLabel(win, i), value: win[i].count })
    if (bars.length === 0) return empty(host, 'no batches yet')
    barChart(host, bars, { testid: 'batch-hist', color: m ? colorOf(m.name) : COLORS[0] })
  }

  function tally(title, win, total, colors, testid) {
    var keys = Object.keys(colors)
    Object.keys(total).forEach(function (k) { if (keys.indexOf(k) < 0) keys.push(k) })
    var sumW = keys.reduce(function (a, k) { return a + (win[k] || 0) }, 0)
    var stack = el('div', { class: 'stack', title: title + ' over the last ' + data.windowS + ' s' }, keys.map(function (k) {
      var share = sumW > 0 ? ((win[k] || 0) / sumW) * 100 : 0
      return share > 0 ? el('div', { title: k + ' ' + Math.round(share) + '%', style: { width: share + '%', background: colors[k] || '#8d99ae' } }) : null
    }))
    var rows = [el('span', { class: 'h', text: title }), el('span', { class: 'h n', text: data.windowS + ' s' }), el('span', { class: 'h n', text: 'total' })]
    keys.forEach(function (k) {
      var w = win[k] || 0
      rows.push(
        el('span', { class: w > 0 ? '' : 'muted' }, swatch(colors[k] || '#8d99ae'), k),
        el('span', { class: 'n' + (w > 0 ? '' : ' muted'), 'data-testid': testid + '-' + k, text: fmtInt(w) }),
        el('span', { class: 'n muted', text: fmtInt(total[k] || 0) }))
    })
    return el('div', { class: 'tally' }, stack, el('div', { class: 'rows' }, rows))
  }

  function renderDispatch(m) {
    var host = $('dispatch')
    $('dispatch-caption').textContent = m ? m.name + ' · last ' + data.windowS + ' s' : ''
    if (!data.workerMetrics) return empty(host, 'Dispatch reasons and sheds are worker metrics: in distributed mode scrape each worker’s --metrics-port /metrics.')
    if (!m) return empty(host, 'no model')
    host.replaceChildren(el('div', { class: 'tallies' },
      tally('dispatch', m.dispatch.window, m.dispatch.total, REASONS, 'dispatch'),
      tally('shed', m.shed.window, m.shed.total, SHEDS, 'shed')))
  }

  function renderWorkers() {
    var host = $('workers')
    var ws = data.workers
    var servers = 0
    ws.forEach(function (w) { servers += w.models.length })
    $('workers-caption').textContent = ws.length + (ws.length === 1 ? ' worker · ' : ' workers · ') + servers + (servers === 1 ? ' model server' : ' model servers')
    if (ws.length === 0) return empty(host, 'no worker answered on the bus')
    var rows = []
    ws.forEach(function (w) {
      rows.push(el('tr', { class: 'wk' }, el('td', { colspan: 5 },
        el('span', { class: 'wid', text: w.id }),
        w.state ? el('span', { class: w.state === 'serving' ? 'state ok' : 'state notready', text: w.state }) : null)))
      w.models.forEach(function (x) {
        var cap = 2 * Math.max(1, x.maxBatchSize || 1) * Math.max(1, x.concurrency || 1)
        var busy = x.queued + (x.running || 0)
        var frac = Math.min(1, busy / cap)
        var tip = x.queued + ' queued, ' + (x.running || 0) + ' running of ' + cap + ' (2 × max batch × concurrency)'
        if (x.cost) tip += '; learned t(b) = ' + x.cost.a.toFixed(2) + ' + ' + x.cost.c.toFixed(3) + '·b ms'
        rows.push(el('tr', { 'data-testid': 'worker-row', title: tip },
          el('td', null, swatch(colorOf(x.name)), x.name, x.ready ? null : el('span', { class: 'notready', text: ' not ready' })),
          el('td', null, el('div', { class: 'bar' }, el('div', { style: { width: Math.max(frac * 100, busy > 0 ? 4 : 0).toFixed(1) + '%', background: frac > 0.75 ? '#f85149' : frac > 0.4 ? '#f9c74f' : '#3fb950' } }))),
          el('td', { class: 'n', text: fmtInt(x.queued) + (x.running !== undefined ? ' / ' + fmtInt(x.running) : '') }),
          el('td', { class: 'n', text: fmtRate(x.rps) }),
          el('td', { class: 'muted', text: (x.policy || '–') + ' · ' + x.maxBatchSize })))
        var notes = []
        if (x.cost) notes.push('learned t(b) = ' + x.cost.a.toFixed(1) + ' + ' + x.cost.c.toFixed(2) + '·b ms')
        if (ok(x.avgProcessingMs) && x.requests) notes.push(fmtMs(x.avgProcessingMs) + ' in worker')
        if (ok(x.meanBatchSize) && x.batches) notes.push(fmtInt(x.batches) + ' batches of ' + x.meanBatchSize.toFixed(1))
        if (notes.length) rows.push(el('tr', { class: 'note' }, el('td', { colspan: 5, text: notes.join(' · ') })))
      })
    })
    host.replaceChildren(el('table', { class: 'workers' },
      el('thead', null, el('tr', null, el('th', { text: 'model' }), el('th', { text: 'load' }), el('th', { class: 'n', text: 'queued / run' }), el('th', { class: 'n', text: 'req/s' }), el('th', { text: 'policy' }))),
      el('tbody', null, rows)))
  }

  function render() {
    if (!data) return
    var sel = pick()
    var m = data.models.find(function (x) { return x.name === sel }) || null
    $('mode').textContent = data.workerMetrics ? 'embedded · gateway + worker metrics' : 'distributed · gateway metrics + worker stats over NATS'
    renderKpis(m)
    renderModels(sel)
    lineChart($('chart-rps'), {
      t1: data.now, yFmt: fmtAxis, testid: 'chart-rps',
      series: data.models.map(function (x) { return { name: x.name, color: colorOf(x.name), points: points(x, 'rps'), area: x.name === sel, width: x.name === sel ? 2.2 : 1.6 } }),
    })
    legend($('legend-rps'), data.models.map(function (x) { return { name: x.name, color: colorOf(x.name), value: fmtRate(x.current.rps) } }))
    $('lat-model').textContent = m ? m.name + ' · end to end' : ''
    lineChart($('chart-lat'), {
      t1: data.now, yFmt: fmtMsAxis, testid: 'chart-lat',
      series: m ? [
        { name: 'p99', color: '#f72585', points: points(m, 'p99Ms'), area: true },
        { name: 'p50', color: '#4cc9f0', points: points(m, 'p50Ms'), area: true },
      ] : [],
    })
    legend($('legend-lat'), m ? [{ name: 'p50', color: '#4cc9f0', value: fmtMs(m.current.p50Ms) }, { name: 'p99', color: '#f72585', value: fmtMs(m.current.p99Ms) }] : [])
    lineChart($('chart-queue'), {
      t1: data.now, yFmt: fmtAxis, testid: 'chart-queue', integer: true,
      series: data.models.map(function (x) { return { name: x.name, color: colorOf(x.name), points: points(x, 'queueDepth'), width: x.name === sel ? 2 : 1.5 } }),
    })
    legend($('legend-queue'), data.models.map(function (x) { return { name: x.name, color: colorOf(x.name), value: fmtInt(x.current.queueDepth) } }))
    renderBatch(m)
    renderDispatch(m)
    renderWorkers()
  }

  function status(live, text) {
    $('status').className = 'status ' + (live ? 'live' : 'down')
    $('status-text').textContent = text
  }

  function poll() {
    var started = Date.now()
    fetch('dashboard/data', { cache: 'no-store', headers: { accept: 'application/json' } })
      .then(function (r) { if (!r.ok) throw new Error('HTTP ' + r.status); return r.json() })
      .then(function (d) {
        data = d
        lastOk = Date.now()
        render()
        status(true, 'live · ' + new Date(lastOk).toLocaleTimeString('en-GB'))
      })
      .catch(function (e) {
        status(false, 'disconnected (' + (e && e.message ? e.message : 'error') + ')' + (lastOk ? ' · last data ' + new Date(lastOk).toLocaleTimeString('en-GB') : ''))
      })
      .then(function () { setTimeout(poll, Math.max(100, POLL_MS - (Date.now() - started))) })
  }

  var resizeTimer = 0
  window.addEventListener('resize', function () { clearTimeout(resizeTimer); resizeTimer = setTimeout(render, 100) })
  window.addEventListener('hashchange', function () { selected = decodeURIComponent(location.hash.slice(1)) || null; render() })
  poll()
})()
`
