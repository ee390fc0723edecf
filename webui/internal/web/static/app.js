// Progressive enhancements; every page works without them.
"use strict";

// Copy buttons: data-copy holds the text.
document.addEventListener("click", (e) => {
  const button = e.target.closest("[data-copy]");
  if (!button || !navigator.clipboard) return;
  navigator.clipboard.writeText(button.dataset.copy).then(() => {
    const label = button.textContent;
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = label; }, 1500);
  });
});

// Live status: while a connection's test runs, poll its status and update
// the page in place.
function watch(el) {
  const url = el.dataset.statusUrl;
  const states = ["testing", "ready", "failed"];
  const poll = async () => {
    try {
      const res = await fetch(url, { headers: { Accept: "application/json" } });
      // Logged out, or the connection is gone: the page itself says which.
      if (!res.ok || res.redirected) {
        location.reload();
        return;
      }
      const s = await res.json();
      states.forEach((c) => el.classList.remove(c));
      el.classList.add(s.state);
      for (const field of el.querySelectorAll("[data-field]")) {
        field.textContent = s[field.dataset.field] || "";
        if (field.dataset.field === "message") field.hidden = s.state !== "failed";
      }
      if (s.state === "testing") setTimeout(poll, 1000);
    } catch (_) {
      setTimeout(poll, 3000);
    }
  };
  if (el.classList.contains("testing")) setTimeout(poll, 700);
}
document.querySelectorAll("[data-status-url]").forEach(watch);

// The connection form shows the fields of the chosen options only.
function toggle(name, values) {
  const inputs = document.querySelectorAll(`input[name="${name}"]`);
  if (!inputs.length) return;
  const update = () => {
    const chosen = document.querySelector(`input[name="${name}"]:checked`)?.value;
    for (const [value, selector] of Object.entries(values)) {
      document.querySelectorAll(selector).forEach((el) => { el.hidden = chosen !== value; });
    }
  };
  inputs.forEach((i) => i.addEventListener("change", update));
  update();
}
toggle("auth", { password: ".when-password", key: ".when-key" });
toggle("trust", { pinned: ".when-pinned" });
toggle("mode", { Upload: ".when-upload" });

// The navigation folds into a menu on a phone's width (app.css).
document.documentElement.classList.add("js");
const menu = document.querySelector(".menu");
if (menu) {
  menu.addEventListener("click", () => {
    const open = document.documentElement.classList.toggle("nav-open");
    menu.setAttribute("aria-expanded", String(open));
  });
}

// Times are written in UTC; each is said again in the reader's own zone.
const local = new Intl.DateTimeFormat(undefined, {
  year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short",
});
document.querySelectorAll("time[data-local]").forEach((el) => {
  const t = new Date(el.getAttribute("datetime"));
  if (!Number.isNaN(t.getTime())) el.textContent = local.format(t);
});
