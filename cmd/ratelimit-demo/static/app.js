// The ratelimit demo page: sends requests through the demo's JSON API,
// shows each decision, polls the key's state for the chart, and edits the
// limiter's configuration. No dependencies, no build step.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);

  // The parameters each algorithm uses, by form field id.
  const FIELDS = {
    'tokenbucket': ['capacity', 'rate'],
    'tokenbucket-interval': ['capacity', 'tokens', 'interval'],
    'gcra': ['burst', 'every'],
    'slidinglog': ['limit', 'window'],
    'slidingwindow': ['limit', 'window'],
    'fixedwindow': ['limit', 'window'],
  };
  const NUMERIC = new Set(['capacity', 'rate', 'tokens', 'burst', 'limit']);
  const HELP = {
    'tokenbucket': 'Holds up to Capacity tokens, refilled continuously at Rate tokens per second: bursts up to Capacity, Rate per second on average.',
    'tokenbucket-interval': 'Holds up to Capacity tokens; Tokens whole tokens arrive at the end of every Interval.',
    'gcra': 'The continuous token bucket kept as one number: bursts up to Burst, one unit back every Every.',
    'slidinglog': 'Admits at most Limit in every rolling window of length Window: exact, one log entry per instant with an admission.',
    'slidingwindow': 'Approximates the rolling window from two fixed windows: the previous one weighted by how much of it is still in the last Window.',
    'fixedwindow': 'Admits at most Limit per window aligned to the clock: the cheapest, but up to 2 × Limit across a window edge.',
  };
  const BUCKETS = new Set(['tokenbucket', 'tokenbucket-interval', 'gcra']);
  const POLL_MS = 250;
  const SPAN_MS = 60000; // the chart's time span
  const MAX_LOG = 200;

  const state = {
    config: null,      // the configuration in service, as GET /api/config reports it
    allowed: 0,
    denied: 0,
    errors: 0,
    seq: 0,            // requests sent
    shownSentAt: 0,    // when the request whose state is shown was sent (performance.now())
    samples: [],       // {t, remaining, limit, retryMs}: the chart's series
    events: [],        // {t, kind}: allowed / denied / error ticks
    marks: [],         // {t, label}: configuration changes and resets
  };

  // ---------- formatting ----------

  // fmtDuration shows milliseconds briefly: 250 ms, 1.25 s, 42.5 s,
  // 16m 40s, 2h 05m.
  function fmtDuration(ms) {
    if (ms == null || Number.isNaN(ms)) return '–';
    if (ms <= 0) return 'now';
    if (ms < 1000) return `${Math.max(1, Math.round(ms))} ms`;
    if (ms < 10000) return `${(ms / 1000).toFixed(2)} s`;
    if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
    const s = Math.round(ms / 1000);
    const pad = (n) => String(n).padStart(2, '0');
    if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
    const m = Math.round(s / 60);
    return `${Math.floor(m / 60)}h ${pad(m % 60)}m`;
  }

  function fmtClock(d) {
    const p = (n, w = 2) => String(n).padStart(w, '0');
    return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
  }

  // parseRateLimit reads r (remaining) and t (seconds to fresh) of the
  // first item of a RateLimit header: "default";r=0;t=17.
  function parseRateLimit(h) {
    if (!h) return {};
    const item = h.split(',')[0];
    const r = /;r=(\d+)/.exec(item);
    const t = /;t=(\d+)/.exec(item);
    return { remaining: r ? Number(r[1]) : undefined, resetS: t ? Number(t[1]) : undefined };
  }

  // ---------- the configuration ----------

  function showFields() {
    const alg = $('algorithm').value;
    for (const el of document.querySelectorAll('.params [data-for]')) {
      el.hidden = !el.dataset.for.split(' ').includes(alg);
    }
    $('algorithm-help').textContent = HELP[alg] || '';
  }

  function fillForm(cfg) {
    const sel = $('store');
    sel.replaceChildren(...cfg.stores.map((s) => {
      const o = document.createElement('option');
      o.value = s.name;
      o.textContent = s.available ? s.name : `${s.name} (not configured)`;
      o.title = s.detail;
      o.disabled = !s.available;
      return o;
    }));
    sel.value = cfg.store;
    $('algorithm').value = cfg.algorithm;
    for (const f of ['capacity', 'rate', 'tokens', 'interval', 'burst', 'every', 'limit', 'window']) {
      $(f).value = cfg[f];
    }
    $('sustained-limit').value = cfg.sustainedLimit;
    $('sustained-window').value = cfg.sustainedWindow;
    showFields();
    $('config-dirty').hidden = true;
  }

  function showActive(cfg) {
    state.config = cfg;
    $('active-config').textContent = cfg.description;
    $('active-store').textContent = cfg.store;
    $('generation').textContent = String(cfg.generation);
    $('limit-display').textContent = String(cfg.maxCost);
    $('remaining-label').textContent = BUCKETS.has(cfg.algorithm) ? 'Tokens left' : 'Left in window';
    $('legend-remaining').textContent = BUCKETS.has(cfg.algorithm) ? 'tokens left' : 'left in window';
    document.body.dataset.generation = String(cfg.generation);
    document.body.dataset.algorithm = cfg.algorithm;
  }

  async function loadConfig() {
    const res = await fetch('/api/config');
    if (!res.ok) throw new Error(`GET /api/config: ${res.status}`);
    const cfg = await res.json();
    fillForm(cfg);
    showActive(cfg);
    return cfg;
  }

  async function applyConfig(ev) {
    ev.preventDefault();
    const alg = $('algorithm').value;
    const body = { store: $('store').value, algorithm: alg };
    for (const f of FIELDS[alg] || []) {
      body[f] = NUMERIC.has(f) ? Number($(f).value) : $(f).value.trim();
    }
    body.sustainedLimit = Number($('sustained-limit').value) || 0;
    if (body.sustainedLimit > 0) body.sustainedWindow = $('sustained-window').value.trim();
    const err = $('config-error');
    $('apply').disabled = true;
    try {
      const res = await fetch('/api/config', {
        method: 'PUT',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
      const data = await res.json().catch(() => ({}));
      if (!res.ok) {
        err.textContent = data.detail || `${res.status} ${res.statusText}`;
        err.hidden = false;
        return;
      }
      err.hidden = true;
      fillForm(data);
      showActive(data);
      state.marks.push({ t: Date.now(), label: data.description });
      addLog('info', 'config', `${data.description} on ${data.store}`);
      loadCompare($('pattern').value); // on the store now in service
      state.shownSentAt = performance.now();
      pollOnce();
    } catch (e) {
      err.textContent = `network error: ${e.message}`;
      err.hidden = false;
    } finally {
      $('apply').disabled = false;
    }
  }

  // ---------- requests ----------

  function addLog(kind, tag, text, n) {
    const li = document.createElement('li');
    li.dataset.kind = kind;
    const cells = [
      ['n', n ? `#${n}` : ''],
      ['t', fmtClock(new Date())],
      ['tag', tag],
      ['msg', text],
    ];
    for (const [cls, txt] of cells) {
      const span = document.createElement('span');
      span.className = cls;
      span.textContent = txt;
      li.append(span);
    }
    const log = $('log');
    log.prepend(li);
    while (log.children.length > MAX_LOG) log.lastElementChild.remove();
  }

  function showCounters() {
    $('allowed-count').textContent = String(state.allowed);
    $('denied-count').textContent = String(state.denied);
    $('error-count').textContent = String(state.errors);
  }

  // showState displays a key's state, unless a request sent later has
  // already been displayed.
  function showState(sentAt, s) {
    if (sentAt < state.shownSentAt) return;
    state.shownSentAt = sentAt;
    $('remaining').textContent = String(s.remaining);
    if (s.limit != null) $('limit-display').textContent = String(s.limit);
    $('retry-after').textContent = fmtDuration(s.retryMs);
    $('reset-after').textContent = fmtDuration(s.resetMs);
    if (s.binding) $('binding').textContent = s.binding;
    state.samples.push({ t: Date.now(), remaining: s.remaining, limit: s.limit ?? state.config?.maxCost ?? 1, retryMs: s.retryMs || 0 });
  }

  function showHeaders(res, body) {
    const names = ['RateLimit-Policy', 'RateLimit', 'X-RateLimit-Limit', 'X-RateLimit-Remaining',
      'X-RateLimit-Reset', 'Retry-After', 'Content-Type'];
    const lines = [`HTTP ${res.status} ${res.statusText || ''}`.trim()];
    for (const n of names) {
      const v = res.headers.get(n);
      if (v != null) lines.push(`${n}: ${v}`);
    }
    if (body) lines.push('', JSON.stringify(body, null, 2));
    $('last-headers').textContent = lines.join('\n');
  }

  async function sendOne() {
    const key = $('key').value || 'demo';
    const cost = $('cost').value || '1';
    const n = ++state.seq;
    const sentAt = performance.now();
    let res, body;
    try {
      res = await fetch(`/api/request?key=${encodeURIComponent(key)}&cost=${encodeURIComponent(cost)}`, { method: 'POST' });
      body = await res.json().catch(() => null);
    } catch (e) {
      state.errors++;
      state.events.push({ t: Date.now(), kind: 'error' });
      addLog('error', 'error', `network error: ${e.message}`, n);
      showCounters();
      return;
    }
    showHeaders(res, body);
    if (res.status === 200 && body) {
      state.allowed++;
      state.events.push({ t: Date.now(), kind: 'allowed' });
      showState(sentAt, { remaining: body.remaining, limit: body.limit, retryMs: body.retryAfterMs, resetMs: body.resetAfterMs, binding: body.binding });
      addLog('allowed', 'allowed',
        `cost ${body.cost} · remaining ${body.remaining} / ${body.limit} · fresh in ${fmtDuration(body.resetAfterMs)}${limitsText(body)}`, n);
    } else if (res.status === 429) {
      // The middleware's 429 carries no decision body: the headers say it.
      const rl = parseRateLimit(res.headers.get('RateLimit'));
      const retryS = Number(res.headers.get('Retry-After'));
      // The problem's detail names the limit that denied.
      const named = body && /rate limit "([^"]*)"/.exec(body.detail || '');
      state.denied++;
      state.events.push({ t: Date.now(), kind: 'denied' });
      showState(sentAt, {
        remaining: rl.remaining ?? 0,
        limit: Number(res.headers.get('X-RateLimit-Limit')) || undefined,
        retryMs: retryS * 1000,
        resetMs: rl.resetS != null ? rl.resetS * 1000 : undefined,
        binding: named ? named[1] : undefined,
      });
      addLog('denied', 'denied', `retry after ${retryS} s (Retry-After) · remaining ${rl.remaining ?? '?'}${named ? ` · denied by ${named[1]}` : ''}`, n);
    } else {
      state.errors++;
      state.events.push({ t: Date.now(), kind: 'error' });
      const why = body && (body.detail || body.title) ? `${body.title}: ${body.detail || ''}` : res.statusText;
      addLog('error', String(res.status), why, n);
    }
    showCounters();
  }

  async function burst() {
    const n = Math.min(100, Math.max(1, Math.floor(Number($('burst-n').value) || 1)));
    $('burst-n').value = String(n);
    await Promise.all(Array.from({ length: n }, () => sendOne()));
  }

  async function resetKey() {
    const key = $('key').value || 'demo';
    const sentAt = performance.now();
    const res = await fetch(`/api/reset?key=${encodeURIComponent(key)}`, { method: 'POST' });
    const body = await res.json().catch(() => null);
    if (!res.ok || !body) {
      addLog('error', String(res.status), (body && body.detail) || 'reset failed');
      return;
    }
    state.allowed = state.denied = state.errors = 0;
    showCounters();
    state.marks.push({ t: Date.now(), label: `reset ${key}` });
    addLog('info', 'reset', `key ${JSON.stringify(key)} forgotten`);
    showState(sentAt, { remaining: body.remaining, limit: body.limit, retryMs: body.retryAfterMs, resetMs: body.resetAfterMs, binding: body.binding });
  }

  // limitsText lists each limit's remaining when a decision has several.
  function limitsText(body) {
    if (!body.limits || body.limits.length < 2) return '';
    return ' · ' + body.limits.map((l) => `${l.name} ${l.remaining}/${l.limit}`).join(', ');
  }

  // ---------- polling the key's state ----------

  async function pollOnce() {
    const key = $('key').value || 'demo';
    const sentAt = performance.now();
    try {
      const res = await fetch(`/api/state?key=${encodeURIComponent(key)}`);
      const body = await res.json().catch(() => null);
      if (!res.ok || !body) {
        setStatus(`state: ${res.status} ${(body && body.detail) || res.statusText}`, true);
        return;
      }
      setStatus('', false);
      if (state.config && body.generation !== state.config.generation) {
        // Someone else changed the configuration.
        const cfg = await loadConfig();
        state.marks.push({ t: Date.now(), label: cfg.description });
        addLog('info', 'config', `${cfg.description} on ${cfg.store} (changed elsewhere)`);
      }
      showState(sentAt, { remaining: body.remaining, limit: body.limit, retryMs: body.retryAfterMs, resetMs: body.resetAfterMs, binding: body.binding });
    } catch (e) {
      setStatus(`server unreachable: ${e.message}`, true);
    }
  }

  async function pollLoop() {
    if (!document.hidden) await pollOnce();
    setTimeout(pollLoop, POLL_MS);
  }

  function setStatus(text, isError) {
    const el = $('status');
    el.textContent = text;
    el.classList.toggle('error', !!isError);
  }

  // ---------- the chart ----------

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    // Multiples whose quarters (the grid lines) read well.
    for (const m of [1, 2, 4, 6, 8, 10]) {
      if (v <= m * p) return m * p;
    }
    return 10 * p;
  }

  function fmtAxis(v) {
    return Number.isInteger(v) ? String(v) : v.toFixed(v < 1 ? 2 : 1);
  }

  function draw() {
    const c = $('chart');
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth;
    const h = c.clientHeight;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);

    const pad = { l: 44, r: 52, t: 14, b: 26 };
    const now = Date.now();
    const t0 = now - SPAN_MS;
    const pw = w - pad.l - pad.r;
    const ph = h - pad.t - pad.b;
    const x = (t) => pad.l + ((t - t0) / SPAN_MS) * pw;

    // Forget what scrolled out, keeping one sample before the edge.
    while (state.samples.length > 1 && state.samples[1].t < t0) state.samples.shift();
    while (state.events.length && state.events[0].t < t0) state.events.shift();
    while (state.marks.length && state.marks[0].t < t0) state.marks.shift();

    const samples = state.samples;
    const limitMax = niceMax(Math.max(1, state.config ? state.config.maxCost : 1, ...samples.map((s) => s.limit)));
    const retryMax = niceMax(Math.max(1, ...samples.map((s) => s.retryMs / 1000)));
    const yL = (v) => pad.t + ph - (v / limitMax) * ph;
    const yR = (v) => pad.t + ph - (v / retryMax) * ph;

    // Grid and axes.
    g.font = '11px system-ui, sans-serif';
    g.lineWidth = 1;
    g.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const y = Math.round(pad.t + (ph * i) / 4) + 0.5;
      g.strokeStyle = i === 4 ? '#cbd5e1' : '#eef2f7';
      g.beginPath();
      g.moveTo(pad.l, y);
      g.lineTo(pad.l + pw, y);
      g.stroke();
      g.fillStyle = '#2563eb';
      g.textAlign = 'right';
      g.fillText(fmtAxis((limitMax * (4 - i)) / 4), pad.l - 6, y);
      g.fillStyle = '#d97706';
      g.textAlign = 'left';
      g.fillText(`${fmtAxis((retryMax * (4 - i)) / 4)} s`, pad.l + pw + 6, y);
    }
    g.fillStyle = '#64748b';
    g.textAlign = 'center';
    g.textBaseline = 'top';
    for (let s = 0; s <= SPAN_MS / 1000; s += 10) {
      const xx = x(t0 + s * 1000);
      g.fillText(s === SPAN_MS / 1000 ? 'now' : `-${SPAN_MS / 1000 - s}s`, xx, pad.t + ph + 8);
    }

    g.save();
    g.beginPath();
    g.rect(pad.l, pad.t - 2, pw, ph + 4);
    g.clip();

    // Configuration changes and resets.
    g.setLineDash([4, 4]);
    g.strokeStyle = '#94a3b8';
    g.fillStyle = '#64748b';
    g.textAlign = 'left';
    g.textBaseline = 'top';
    // Labels newest first; one that would overlap a newer one is left out.
    let freeRight = pad.l + pw; // labels may extend up to here
    for (const m of [...state.marks].reverse()) {
      const xx = Math.round(x(m.t)) + 0.5;
      g.beginPath();
      g.moveTo(xx, pad.t);
      g.lineTo(xx, pad.t + ph);
      g.stroke();
      // The label goes left of the line when it would not fit right of it.
      const width = g.measureText(m.label).width;
      const left = xx + 4 + width <= freeRight ? xx + 4 : xx - 4 - width;
      if (left >= pad.l && left + width <= freeRight) {
        g.textAlign = 'left';
        g.fillText(m.label, left, pad.t + 2);
        freeRight = left - 8;
      }
    }
    g.setLineDash([]);

    if (samples.length) {
      // Remaining: a step line with a light fill.
      const path = new Path2D();
      let prevY = yL(samples[0].remaining);
      path.moveTo(x(samples[0].t), prevY);
      for (const s of samples.slice(1)) {
        const xx = x(s.t);
        path.lineTo(xx, prevY);
        prevY = yL(s.remaining);
        path.lineTo(xx, prevY);
      }
      path.lineTo(x(now), prevY);
      const fill = new Path2D(path);
      fill.lineTo(x(now), yL(0));
      fill.lineTo(x(samples[0].t), yL(0));
      fill.closePath();
      g.fillStyle = 'rgba(37, 99, 235, 0.10)';
      g.fill(fill);
      g.strokeStyle = '#2563eb';
      g.lineWidth = 2;
      g.stroke(path);

      // Retry after: a line on the right axis.
      g.strokeStyle = '#d97706';
      g.lineWidth = 1.5;
      g.beginPath();
      samples.forEach((s, i) => {
        const p = [x(s.t), yR(s.retryMs / 1000)];
        if (i === 0) g.moveTo(...p); else g.lineTo(...p);
      });
      g.lineTo(x(now), yR(samples[samples.length - 1].retryMs / 1000));
      g.stroke();
    }

    // Requests: ticks along the bottom.
    g.lineWidth = 2;
    for (const e of state.events) {
      g.strokeStyle = e.kind === 'allowed' ? '#16a34a' : e.kind === 'denied' ? '#dc2626' : '#92400e';
      const xx = x(e.t);
      g.beginPath();
      g.moveTo(xx, pad.t + ph);
      g.lineTo(xx, pad.t + ph - 12);
      g.stroke();
    }
    g.restore();
  }

  let lastDraw = 0;
  function frame(ts) {
    if (ts - lastDraw > 100) {
      lastDraw = ts;
      draw();
    }
    requestAnimationFrame(frame);
  }

  // ---------- the comparison ----------

  // The comparison's layout, in SVG units: a label column, the timeline,
  // and the counts per window, as in docs/algorithms.svg.
  const CMP = { width: 960, label: 200, time: 600, row: 26, axis: 22 };
  const SVG_NS = 'http://www.w3.org/2000/svg';

  function svgEl(name, attrs, text) {
    const el = document.createElementNS(SVG_NS, name);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
    if (text != null) el.textContent = text;
    return el;
  }

  // loadCompare fetches pattern's comparison ('' for the server's default)
  // and draws it. Requests answered out of order are dropped.
  let compareSeq = 0;
  async function loadCompare(pattern) {
    const seq = ++compareSeq;
    const err = $('compare-error');
    try {
      const res = await fetch(`/api/compare?pattern=${encodeURIComponent(pattern)}`);
      const data = await res.json().catch(() => ({}));
      if (seq !== compareSeq) return;
      if (!res.ok) throw new Error(data.detail || `GET /api/compare: ${res.status}`);
      err.hidden = true;
      drawCompare(data);
    } catch (e) {
      if (seq !== compareSeq) return;
      err.textContent = e.message;
      err.hidden = false;
    }
  }

  // drawCompare shows a comparison: one row per algorithm, a tick up for
  // each admitted request and a tick down for each denied one, at its
  // instant; window edges dashed; the count admitted in each window.
  function drawCompare(c) {
    const sel = $('pattern');
    if (sel.options.length !== c.patterns.length) {
      sel.replaceChildren(...c.patterns.map((p) => {
        const o = document.createElement('option');
        o.value = p.name;
        o.textContent = p.title;
        return o;
      }));
    }
    sel.value = c.pattern.name;
    $('pattern-description').textContent = c.pattern.description;
    $('compare-meta').textContent = `${c.requestsMs.length} requests, each algorithm ${c.limit} per ` +
      `${c.windowMs / 1000} s, on a fake clock (the same instants every time), store ${c.store}.`;

    const top = 4;
    const height = top + c.rows.length * CMP.row + CMP.axis;
    const x = (ms) => CMP.label + (CMP.time * ms) / c.spanMs;
    const svg = svgEl('svg', { viewBox: `0 0 ${CMP.width} ${height}`, role: 'img',
      'aria-label': `${c.pattern.title}: admitted and denied requests of each algorithm over ${c.spanMs / 1000} s` });
    c.rows.forEach((r, i) => {
      const y = top + i * CMP.row;
      const mid = y + CMP.row / 2;
      const g = svgEl('g', { class: 'row', 'data-alg': r.name });
      if (i % 2 === 0) g.append(svgEl('rect', { class: 'band', x: 0, y, width: CMP.width, height: CMP.row }));
      const label = svgEl('text', { class: 'label', x: 10, y: mid + 4 }, r.title);
      label.append(svgEl('title', {}, r.algorithm));
      g.append(label);
      for (const ms of r.admittedMs) {
        g.append(svgEl('line', { class: 'admitted', x1: x(ms), y1: mid - 1, x2: x(ms), y2: y + 3 }));
      }
      for (const ms of r.deniedMs) {
        g.append(svgEl('line', { class: 'denied', x1: x(ms), y1: mid + 1, x2: x(ms), y2: y + CMP.row - 3 }));
      }
      const counts = svgEl('text', { class: 'counts', x: CMP.label + CMP.time + 16, y: mid + 4 }, r.perWindow.join(' · ') + ' ');
      counts.append(svgEl('tspan', { class: 'most' }, `(${r.maxInWindow})`));
      g.append(counts);
      svg.append(g);
    });
    const bottom = top + c.rows.length * CMP.row;
    for (let ms = 0; ms <= c.spanMs; ms += c.windowMs) {
      svg.append(svgEl('line', { class: 'edge', x1: x(ms), y1: top, x2: x(ms), y2: bottom }));
      svg.append(svgEl('text', { class: 'axis', x: x(ms), y: bottom + 15, 'text-anchor': 'middle' }, `${ms / 1000} s`));
    }
    $('compare').replaceChildren(svg);
    document.body.dataset.compare = c.pattern.name;
  }

  // ---------- wiring ----------

  function init() {
    $('config-form').addEventListener('submit', applyConfig);
    $('algorithm').addEventListener('change', showFields);
    $('config-form').addEventListener('input', () => { $('config-dirty').hidden = false; });
    $('config-form').addEventListener('change', () => { $('config-dirty').hidden = false; });
    $('send').addEventListener('click', () => { sendOne(); });
    $('send-burst').addEventListener('click', () => { burst(); });
    $('reset').addEventListener('click', () => { resetKey(); });
    $('clear-log').addEventListener('click', () => { $('log').replaceChildren(); });
    $('pattern').addEventListener('change', () => { loadCompare($('pattern').value); });
    $('key').addEventListener('change', () => {
      state.marks.push({ t: Date.now(), label: `key ${$('key').value}` });
      state.shownSentAt = performance.now();
      pollOnce();
    });
    // Redraw at once when the canvas changes size, rather than showing a
    // stretched picture until the next frame.
    new ResizeObserver(() => draw()).observe($('chart'));
    loadConfig()
      .then(() => { document.body.dataset.ready = 'true'; })
      .catch((e) => setStatus(e.message, true))
      .finally(() => { pollLoop(); requestAnimationFrame(frame); loadCompare(''); });
  }

  init();
})();
