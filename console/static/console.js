// gazconsumer console: reloads the live part of a page every 2 s, and draws
// its charts (inline SVG, no library) from /api/series every second.
"use strict";
(function () {
  const conn = document.getElementById("conn");
  const setConn = (msg) => { if (conn) conn.textContent = msg; };

  // The live part: the server renders it (?fragment=1); it is swapped whole.
  const live = document.querySelector("[data-live]");
  async function reloadLive() {
    try {
      const resp = await fetch(live.dataset.live, { cache: "no-store" });
      const html = await resp.text();
      live.innerHTML = html; // An error page of the console is shown too.
      setConn(resp.ok ? "" : "console: " + resp.status + " " + resp.statusText);
    } catch (e) {
      setConn("the console is unreachable: " + e.message);
    }
  }
  if (live) setInterval(reloadLive, 2000);

  const colors = ["#2f6fed", "#e8590c", "#12b886", "#ae3ec9", "#f59f00", "#1c7ed6", "#d6336c", "#495057"];
  const bytes = (n) => {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
  };
  const svgNS = "http://www.w3.org/2000/svg";
  const el = (name, attrs, text) => {
    const e = document.createElementNS(svgNS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };

  // draw draws the series of metric ("rate" or "lag") of each shard.
  function draw(chart, data, metric) {
    const fmt = metric === "lag" ? bytes : (x) => x.toFixed(x < 10 ? 1 : 0);
    const W = 600, H = 200, L = 64, R = 8, T = 8, B = 22;
    let maxY = 0;
    for (const s of data.shards) for (const v of s[metric]) if (v !== null && v > maxY) maxY = v;
    if (maxY === 0) maxY = metric === "lag" ? 1024 : 1;
    const t0 = data.t.length ? data.t[0] : 0, t1 = data.t.length ? data.t[data.t.length - 1] : 1;
    const x = (t) => L + (W - L - R) * (t1 === t0 ? 1 : (t - t0) / (t1 - t0));
    const y = (v) => T + (H - T - B) * (1 - v / maxY);
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
    for (const f of [0, 0.5, 1]) {
      svg.appendChild(el("line", { x1: L, x2: W - R, y1: y(maxY * f), y2: y(maxY * f), stroke: "#e4e7ec" }));
      svg.appendChild(el("text", { x: L - 6, y: y(maxY * f) + 4, "text-anchor": "end", "font-size": 11, fill: "#667085" }, fmt(maxY * f)));
    }
    const span = Math.round((t1 - t0) / 1000);
    svg.appendChild(el("text", { x: L, y: H - 6, "font-size": 11, fill: "#667085" }, span + " s ago"));
    svg.appendChild(el("text", { x: W - R, y: H - 6, "text-anchor": "end", "font-size": 11, fill: "#667085" }, "now"));
    const legend = document.createElement("div");
    legend.className = "legend";
    data.shards.forEach((s, i) => {
      const color = colors[i % colors.length];
      let d = "", pen = false, last = null;
      s[metric].forEach((v, j) => {
        if (v === null) { pen = false; return; }
        d += (pen ? "L" : "M") + x(data.t[j]).toFixed(1) + " " + y(v).toFixed(1) + " ";
        pen = true; last = v;
      });
      if (d) svg.appendChild(el("path", { d, fill: "none", stroke: color, "stroke-width": 2, "vector-effect": "non-scaling-stroke" }));
      const item = document.createElement("span");
      item.innerHTML = `<i style="background:${color}"></i>`;
      item.append(s.id + ": " + (last === null ? "—" : fmt(last)));
      legend.appendChild(item);
    });
    const title = document.createElement("div");
    title.className = "title";
    title.textContent = chart.dataset.title;
    chart.replaceChildren(title, svg, legend);
  }

  const charts = document.querySelectorAll(".chart[data-src]");
  async function reloadCharts() {
    const bySrc = new Map();
    for (const c of charts) {
      if (!bySrc.has(c.dataset.src)) bySrc.set(c.dataset.src, fetch(c.dataset.src, { cache: "no-store" }).then((r) => {
        if (!r.ok) throw new Error(r.status + " " + r.statusText);
        return r.json();
      }));
    }
    for (const c of charts) {
      try {
        draw(c, await bySrc.get(c.dataset.src), c.dataset.metric);
      } catch (e) {
        setConn("charts: " + e.message);
      }
    }
  }
  if (charts.length) {
    reloadCharts();
    setInterval(reloadCharts, 1000);
  }
})();
