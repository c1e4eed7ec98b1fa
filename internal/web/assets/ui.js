// Falcon's dashboard: live statuses through server-sent events, and the
// readout of a chart under the pointer. Pages work without it; it only
// keeps them current.
"use strict";
(() => {
  const $ = (sel, root = document) => root.querySelector(sel);
  const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));
  const words = (s) => new Set((s || "").split(" ").filter(Boolean));

  function liveState(text) {
    const el = $("#live-state");
    if (el) el.textContent = text;
  }

  // show writes a change into the element holding a status, reason and
  // message (a table row, the experiment's headline).
  function show(el, c) {
    const st = $("[data-role=status]", el);
    if (st) {
      st.textContent = c.status;
      st.className = "status st-" + c.status.toLowerCase();
    }
    const r = $("[data-role=reason]", el);
    if (r) r.textContent = c.reason;
    const m = $("[data-role=message]", el);
    if (m) m.textContent = c.message;
    el.classList.remove("changed");
    void el.offsetWidth; // restart the highlight
    el.classList.add("changed");
  }

  // follow opens an event stream; the server ends it with "end" once
  // there is nothing left to follow, and EventSource reconnects by itself
  // (sending the last event's id) when it breaks before that.
  function follow(url, onChange) {
    const es = new EventSource(url);
    es.addEventListener("open", () => liveState("live"));
    es.addEventListener("change", (ev) => onChange(JSON.parse(ev.data)));
    es.addEventListener("end", () => { es.close(); liveState("ended"); });
    es.addEventListener("failure", (ev) => {
      es.close();
      liveState("stopped: " + JSON.parse(ev.data).message);
    });
    es.addEventListener("error", () => {
      liveState(es.readyState === EventSource.CLOSED ? "stopped; reload to follow again" : "reconnecting…");
    });
    window.addEventListener("pagehide", () => es.close());
  }

  function followList() {
    const table = $("#experiments");
    const ended = words(table.dataset.terminal);
    const rows = $$("tr[data-exp-id]", table).filter((r) => !ended.has(r.dataset.status));
    if (!rows.length) return;
    const q = new URLSearchParams();
    for (const r of rows) q.append("id", r.dataset.expId + ":" + r.dataset.version);
    follow("/ui/live?" + q, (c) => {
      const row = $(`tr[data-exp-id="${c.id}"]`, table);
      if (!row) return;
      if (c.gone) {
        row.classList.add("gone");
        return;
      }
      row.dataset.status = c.status;
      row.dataset.version = c.version;
      show(row, c);
    });
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function followExp() {
    const sec = $("#exp");
    const ended = words(sec.dataset.terminal);
    const jobEnded = words(sec.dataset.jobTerminal);
    const jobs = () => $$("#jobs-table tr[data-job-id]");
    if (ended.has(sec.dataset.status) && jobs().every((r) => jobEnded.has(r.dataset.status))) return;
    const id = sec.dataset.expId;
    follow(`/ui/experiments/${encodeURIComponent(id)}/live?after=${sec.dataset.lastSeq}`, (c) => {
      if (c.kind === "experiment") {
        sec.dataset.status = c.status;
        show($("#headline"), c);
      } else {
        const row = $(`#jobs-table tr[data-job-id="${c.id}"]`);
        if (row) {
          row.dataset.status = c.status;
          show(row, c);
        }
      }
      const body = $("#events-table tbody");
      if (!$(`tr[data-seq="${c.seq}"]`, body)) {
        const tr = document.createElement("tr");
        tr.dataset.seq = c.seq;
        cell(tr, String(c.seq));
        cell(tr, c.time || "");
        cell(tr, c.kind + " " + c.id, "mono");
        const st = document.createElement("span");
        st.className = "status st-" + c.status.toLowerCase();
        st.textContent = c.status;
        cell(tr, "").appendChild(st);
        cell(tr, c.reason);
        cell(tr, c.message, "msg");
        tr.className = "changed";
        body.prepend(tr);
      }
      sec.dataset.lastSeq = c.seq;
      if (c.terminal) liveState("ended: reload for the final artifacts and metrics");
    });
  }

  // nearest is the value of the point closest to step x (points in step order).
  function nearest(pts, x) {
    if (!pts.length) return null;
    let lo = 0, hi = pts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (pts[mid][0] < x) lo = mid + 1; else hi = mid;
    }
    if (lo > 0 && x - pts[lo - 1][0] < pts[lo][0] - x) lo--;
    return pts[lo][1];
  }

  const fmt = (v) => (v === null ? "–" : Number(v.toPrecision(5)).toString());

  function readouts() {
    for (const fig of $$("figure.chart-box")) {
      const svg = $("svg.chart", fig);
      const data = $("script.chart-data", fig);
      const out = $(".readout", fig);
      if (!svg || !data || !out) continue;
      const lines = JSON.parse(data.textContent).lines;
      const d = svg.dataset;
      const x0 = +d.x0, x1 = +d.x1, px0 = +d.px0, px1 = +d.px1;
      const cursor = $("line.cursor", svg);
      svg.addEventListener("mousemove", (ev) => {
        const p = new DOMPoint(ev.clientX, ev.clientY).matrixTransform(svg.getScreenCTM().inverse());
        if (p.x < px0 || p.x > px1) return;
        const step = x0 + ((p.x - px0) / (px1 - px0)) * (x1 - x0);
        cursor.setAttribute("x1", p.x);
        cursor.setAttribute("x2", p.x);
        cursor.classList.add("on");
        out.textContent = "step " + Math.round(step) + ": " +
          lines.map((l) => l.label + " " + fmt(nearest(l.points, step))).join(" · ");
      });
      svg.addEventListener("mouseleave", () => cursor.classList.remove("on"));
    }
  }

  const page = document.body.dataset.page;
  if (page === "list") followList();
  if (page === "exp") followExp();
  readouts();
})();
