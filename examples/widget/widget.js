// statusgate status widget: who is online, TPS and, for staff with a key,
// the server's details and its bans, read from a statusgate gateway on another
// origin. Plain JavaScript, no build step, no framework, no dependencies.
//
// Embed it with an element and this script:
//
//   <link rel="stylesheet" href="widget.css">
//   <div class="statusgate" data-api="https://stats.example.com"></div>
//   <script src="widget.js" defer></script>
//
// The public part is live: /status and /performance come as server-sent
// events (EventSource) on the same URLs, an event whenever the answer changes
// (docs/live.md). Where a stream is refused (the gateway's limits, a browser
// without EventSource, an endpoint without a cache time), the widget says why,
// asks with a plain GET every data-refresh seconds, and tries the stream again
// after Retry-After. Player names are looked up one at a time, so that the
// page never has more than three requests open at once (two streams and a
// look-up): two tabs of it stay under the demo's max_per_client 4 and
// max_streams_per_client 4; a third tab's streams are refused, which it says,
// and it gets them as soon as a tab closes.
//
// Attributes of the element:
//   data-api      the gateway's origin (required), without /api/v1
//   data-view     "network" shows the network (/network: every server's count,
//                 the total, a server that does not answer); default: this
//                 server (/status, its players' names, TPS)
//   data-refresh  seconds between refreshes without a stream; default 15
//   data-timeout  seconds a request may take before it is given up; default 6
//   data-staff    "off" leaves the staff part out; default on
//
// The staff key is typed into the page and kept in a variable of this script
// only: never in storage, a cookie or the URL, and gone when the tab closes or
// "Forget key" is pressed. It travels in the X-API-Key header, so every keyed
// request is preceded by a CORS preflight that the gateway answers.
//
// Everything the API returns is written with textContent, never as HTML: player
// names and the MOTD come from the game server and must not become markup.
(function () {
  "use strict";

  var DEFAULT_REFRESH_S = 15;
  var DEFAULT_TIMEOUT_S = 6;
  var MAX_NAMES = 32; // name look-ups per refresh; the rest are counted only

  function seconds(value, fallback) {
    var n = Number(value);
    return value && isFinite(n) && n > 0 ? n : fallback;
  }

  // el builds an element; children are nodes or strings (as text).
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    (children || []).forEach(function (c) {
      e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return e;
  }

  // plain drops Minecraft's formatting codes (§a, §l, …) from a text.
  function plain(s) {
    return String(s == null ? "" : s).replace(/§[0-9a-fk-orx]/gi, "");
  }

  function clock(d) {
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  // Statuses the gateway (or the game server behind it) answers with, as a
  // reader would put them. keyed says whether the request carried a key.
  function hint(status, keyed, retryAfter) {
    var retry = retryAfter ? "; retry in " + retryAfter + " s" : "";
    switch (status) {
      case 401:
        return keyed ? "the key was not accepted" : "a key is required";
      case 404:
        return keyed
          ? "the key was not accepted, or this endpoint is switched off (the gateway answers 404 for both)"
          : "not public on this server";
      case 429:
        return "too many requests" + retry;
      case 502:
        return "the game server did not answer the gateway";
      case 503:
        return "the server is busy or this feature is unavailable" + retry;
      case 504:
        return "the game server took too long to answer";
      default:
        return "unexpected answer";
    }
  }

  function Widget(root) {
    this.root = root;
    this.api = "";
    try {
      var u = new URL(root.getAttribute("data-api") || "");
      if (u.protocol === "http:" || u.protocol === "https:") this.api = u.origin + u.pathname.replace(/\/+$/, "");
    } catch (e) {
      this.api = "";
    }
    this.refreshMs = seconds(root.getAttribute("data-refresh"), DEFAULT_REFRESH_S) * 1000;
    this.timeoutS = seconds(root.getAttribute("data-timeout"), DEFAULT_TIMEOUT_S);
    this.staff = root.getAttribute("data-staff") !== "off";
    this.network = root.getAttribute("data-view") === "network";
    this.key = ""; // the staff key: memory only
    this.names = new Map(); // uuid -> name, for the page's lifetime
    this.hidden = {}; // endpoint -> meta.hiddenFields last seen
    this.perfPublic = true; // false once /performance was refused anonymously
    this.busy = false;
    this.streams = {}; // path -> its open EventSource
    this.backoff = {}; // path -> the last wait before a refused stream was tried again, ms
    this.lookups = Promise.resolve(); // the name look-ups, one after another
    this.online = [];
    this.build();
    if (!this.api) {
      this.state(this.pub.state, "error", "No API: set data-api to the gateway's URL, e.g. https://stats.example.com");
      return;
    }
    this.tick();
  }

  Widget.prototype.build = function () {
    var r = this.root;
    r.textContent = "";
    r.classList.add("statusgate");
    this.pub = {
      state: el("p", { class: "sg-state", "data-sg": "public-state", "data-state": "loading", role: "status" }, ["Loading…"]),
      online: el("strong", { "data-sg": "online" }, ["–"]),
      discord: el("strong", { "data-sg": "discord" }, ["–"]),
      tps: el("strong", { "data-sg": "tps" }, ["–"]),
      servers: el("strong", { "data-sg": "servers" }, ["–"]),
      serverList: el("ul", { class: "sg-players", "data-sg": "network" }),
      tpsMore: el("small", { "data-sg": "tps-more" }),
      players: el("ul", { class: "sg-players", "data-sg": "players" }),
      hidden: el("p", { class: "sg-hidden", "data-sg": "hidden", hidden: "" }),
    };
    var p = this.pub;
    // The network view shows the servers where the server view shows TPS
    // and the players' names.
    var middle = this.network
      ? el("div", { class: "sg-tile" }, [p.servers, el("span", {}, ["servers"])])
      : el("div", { class: "sg-tile" }, [p.tps, el("span", {}, ["TPS"]), p.tpsMore]);
    r.appendChild(
      el("section", { class: "sg-public" }, [
        el("h2", {}, [this.network ? "Network status" : "Server status"]),
        el("div", { class: "sg-tiles" }, [
          el("div", { class: "sg-tile" }, [p.online, el("span", {}, ["online"])]),
          middle,
          el("div", { class: "sg-tile" }, [p.discord, el("span", {}, ["on Discord"])]),
        ]),
        this.network ? p.serverList : p.players,
        p.hidden,
        p.state,
      ])
    );
    if (!this.staff) return;

    var s = (this.st = {
      input: el("input", {
        type: "password", "data-sg": "key", autocomplete: "off", spellcheck: "false",
        placeholder: "API key", "aria-label": "API key",
      }),
      forget: el("button", { type: "button", "data-sg": "forget", disabled: "" }, ["Forget key"]),
      state: el("p", { class: "sg-state", "data-sg": "staff-state", "data-state": "idle", role: "status" },
        ["Type a key to see the server's details and bans. It stays in this tab's memory only."]),
      server: el("dl", { class: "sg-server", "data-sg": "server", hidden: "" }),
      bans: el("ul", { class: "sg-bans", "data-sg": "bans", hidden: "" }),
    });
    var form = el("form", { class: "sg-keyform", "data-sg": "connect", autocomplete: "off" }, [
      s.input, el("button", { type: "submit" }, ["Show staff data"]), s.forget,
    ]);
    var self = this;
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var k = s.input.value.trim();
      s.input.value = "";
      if (!k) return;
      self.key = k;
      s.forget.disabled = false;
      self.state(s.state, "loading", "Checking the key…");
      self.refreshStaff();
    });
    s.forget.addEventListener("click", function () { self.forget("Key forgotten."); });
    r.appendChild(el("section", { class: "sg-staff" }, [el("h2", {}, ["Staff"]), form, s.state, s.server, s.bans]));
  };

  Widget.prototype.state = function (node, state, text) {
    node.setAttribute("data-state", state);
    node.textContent = text;
  };

  // call GETs an API path and never throws. It resolves to
  // {ok:true, data, meta} or {ok:false, status, text}; status 0 means no
  // answer at all (timeout, network down, or CORS refused by the browser).
  //
  // probe (no key) asks as EventSource does, with Accept: text/event-stream
  // (a header that needs no preflight): a stream that opens is closed at
  // once and resolves to {stream: true}; any other answer is what it is,
  // the refusal of a stream or the plain answer of an endpoint without one.
  Widget.prototype.call = function (path, key, probe) {
    var ctrl = new AbortController();
    var timeoutS = this.timeoutS;
    var timer = setTimeout(function () { ctrl.abort(); }, timeoutS * 1000);
    var headers = key ? { "X-API-Key": key } : {};
    if (probe) headers.Accept = "text/event-stream";
    // credentials "omit": the key is a header; cookies are never needed, and
    // the gateway's Access-Control-Allow-Origin "*" would refuse them anyway.
    return fetch(this.api + path, { headers: headers, signal: ctrl.signal, credentials: "omit", cache: "no-store" })
      .then(function (res) {
        if ((res.headers.get("Content-Type") || "").indexOf("text/event-stream") === 0) {
          ctrl.abort();
          return { res: res, body: null, stream: true };
        }
        return res.json().then(
          function (body) { return { res: res, body: body }; },
          function () { return { res: res, body: null }; }
        );
      })
      .then(function (x) {
        var res = x.res, body = x.body;
        if (x.stream) return { ok: false, stream: true, status: res.status, text: "" };
        if (res.ok && body && body.ok === true) return { ok: true, status: res.status, data: body.data, meta: body.meta || {} };
        var err = (body && body.error) || {};
        var text = res.status + " " + (err.message || res.statusText || "Error");
        if (err.path) text += " (" + err.path + ")";
        var retryAfter = res.headers.get("Retry-After");
        return { ok: false, status: res.status, retryAfter: Number(retryAfter) || 0, text: text + ": " + hint(res.status, !!key, retryAfter) };
      })
      .catch(function () {
        var text = ctrl.signal.aborted
          ? "No answer from the API within " + timeoutS + " s; it is slow or down. Retrying."
          : "The API cannot be reached (down, or this page's origin is not allowed). Retrying.";
        return { ok: false, status: 0, text: text };
      })
      .finally(function () { clearTimeout(timer); });
  };

  // tick refreshes what has no stream and schedules the next refresh once
  // this one is over, so that a slow API never has two refreshes of the page
  // under way. A hidden tab asks nothing.
  Widget.prototype.tick = function () {
    var self = this;
    var run = document.hidden ? Promise.resolve() : Promise.all([this.refreshPublic(), this.key ? this.refreshStaff() : null]);
    run
      .catch(function (e) {
        // An answer of an unexpected shape: say so, and keep refreshing.
        self.state(self.pub.state, "error", "Unexpected answer from the API: " + e.message);
      })
      .then(function () { setTimeout(function () { self.tick(); }, self.refreshMs); });
  };

  // live opens a stream of path and hands each answer to show, as call
  // resolves. It returns false where the browser has no EventSource. A
  // stream that is refused, cannot connect or ends (a reload of the
  // gateway, its stream_lifetime) is asked once as call's probe, whose
  // answer says why (a 429 with Retry-After, a 404, an API that cannot be
  // reached) or is the answer itself (an endpoint that has no stream); the
  // stream is opened again after Retry-After, or data-refresh (a second
  // when it had just ended), and meanwhile tick asks with plain GETs.
  Widget.prototype.live = function (path, show) {
    if (typeof EventSource === "undefined") return false;
    var self = this;
    var es = new EventSource(this.api + path);
    this.streams[path] = es;
    es.onmessage = function (ev) {
      self.backoff[path] = 0;
      var body;
      try { body = JSON.parse(ev.data); } catch (e) { body = null; }
      if (body && body.ok === true) {
        show({ ok: true, data: body.data, meta: body.meta || {} });
        return;
      }
      var err = (body && body.error) || {};
      var status = err.status || 0;
      var text = status + " " + (err.message || "Error") + (err.path ? " (" + err.path + ")" : "");
      show({ ok: false, status: status, text: text + ": " + hint(status, false, "") });
    };
    es.onerror = function () {
      // The widget reconnects itself rather than leave it to EventSource,
      // which gives up on a refusal and retries a dead API without a word:
      // either way the page must say why it shows nothing new.
      es.close();
      delete self.streams[path];
      self.call(path, "", true).then(function (r) {
        if (r.ok) {
          show(r); // no stream for this endpoint here: plain GETs from now on
          return;
        }
        if (!r.stream) show(r); // why: the 429 and its Retry-After, a 404, …
        if (r.status === 401 || r.status === 404) return; // not public: stop asking
        // Again after Retry-After, or a wait that doubles from 2 s up to
        // data-refresh: a refused page comes back soon after a seat is free,
        // and many refused pages do not knock all at once.
        var back = Math.min(Math.max(2000, (self.backoff[path] || 1000) * 2), self.refreshMs);
        self.backoff[path] = back;
        var wait = Math.max((r.retryAfter || 0) * 1000, r.stream ? 1000 : back);
        setTimeout(function () { self.live(path, show); }, wait);
      });
    };
    return true;
  };

  // streaming reports whether path comes as a stream now.
  Widget.prototype.streaming = function (path) {
    return !!this.streams[path];
  };

  Widget.prototype.refreshPublic = function () {
    var self = this;
    if (this.network) {
      if (!this.started) {
        this.started = true;
        this.live("/api/v1/network", function (r) { self.showNetwork(r); });
      }
      if (this.streaming("/api/v1/network")) return Promise.resolve();
      return this.call("/api/v1/network").then(function (r) { self.showNetwork(r); });
    }
    if (!this.started) {
      this.started = true;
      this.live("/api/v1/status", function (st) { self.showStatus(st); });
      if (this.perfPublic) this.live("/api/v1/performance", function (r) { self.showTPS(r); });
    }
    var ask = [];
    if (!this.streaming("/api/v1/status")) {
      ask.push(this.call("/api/v1/status").then(function (st) { return self.showStatus(st); }));
    }
    if (this.perfPublic && !this.streaming("/api/v1/performance")) {
      ask.push(this.call("/api/v1/performance").then(function (r) { self.showTPS(r); }));
    }
    return Promise.all(ask);
  };

  // showStatus shows an answer of /status: the count, then the names, looked
  // up one at a time, newest answer first (a look-up under way when the next
  // answer comes is finished, not repeated).
  Widget.prototype.showStatus = function (st) {
    var self = this, p = this.pub;
    if (!st.ok) {
      self.state(p.state, "error", st.text);
      return Promise.resolve();
    }
    var d = st.data || {};
    this.hidden.status = st.meta.hiddenFields;
    // The gateway may hide the list (protected_fields status online) and
    // leave the count: then the count is shown and the list said hidden,
    // never "Nobody is online".
    var listed = Array.isArray(d.online);
    var online = listed ? d.online : [];
    var count = typeof d.minecraft === "number" ? d.minecraft : listed ? online.length : null;
    p.online.textContent = count === null ? "–" : String(count);
    p.discord.textContent = typeof d.discord === "number" ? String(d.discord) : "–";
    this.online = online;
    if (!listed) {
      this.renderUnlisted(count, st.meta.hiddenFields);
      this.renderHidden();
      this.state(p.state, "ok", "Updated " + clock(new Date()));
      return Promise.resolve();
    }
    self.renderPlayers(online);
    return this.lookUpNames(online.slice(0, MAX_NAMES)).then(function () {
      if (self.online !== online) return; // a newer answer shows itself
      self.renderPlayers(online);
      self.renderHidden();
      self.state(p.state, "ok", "Updated " + clock(new Date()));
    });
  };

  // lookUpNames fetches /player/{uuid} for players not seen before, one at a
  // time; the answers are public, with the protected fields already
  // removed. Look-ups of several answers queue behind each other.
  Widget.prototype.lookUpNames = function (uuids) {
    var self = this;
    this.lookups = this.lookups.then(function () {
      return uuids.reduce(function (prev, u) {
        return prev.then(function () {
          if (self.names.has(u)) return;
          return self.call("/api/v1/player/" + encodeURIComponent(u)).then(function (r) {
            if (!r.ok) return;
            if (r.data && r.data.name) self.names.set(u, plain(r.data.name));
            self.hidden.player = r.meta.hiddenFields;
          });
        });
      }, Promise.resolve());
    });
    return this.lookups;
  };

  // showTPS shows an answer of /performance.
  Widget.prototype.showTPS = function (r) {
    var p = this.pub;
    if (!r.ok) {
      if (r.status === 404 || r.status === 401) {
        this.perfPublic = false; // switched off or protected: stop asking
        p.tps.textContent = "–";
        p.tpsMore.textContent = "not public";
      } else if (r.status) {
        p.tpsMore.textContent = r.text;
      }
      return;
    }
    var tps = (r.data && r.data.tps) || {};
    var f = function (v) { return typeof v === "number" ? v.toFixed(2) : "–"; };
    p.tps.textContent = f(tps["1m"]);
    p.tpsMore.textContent = "5m " + f(tps["5m"]) + " · 15m " + f(tps["15m"]);
    this.hidden.performance = r.meta.hiddenFields;
    this.renderHidden();
  };

  Widget.prototype.renderPlayers = function (online) {
    var ul = this.pub.players, names = this.names;
    ul.textContent = "";
    var known = online.filter(function (u) { return names.has(u); }).map(function (u) { return names.get(u); });
    known.sort(function (a, b) { return a.localeCompare(b); });
    known.forEach(function (n) { ul.appendChild(el("li", {}, [n])); });
    var rest = online.length - known.length;
    if (rest > 0) ul.appendChild(el("li", { class: "sg-more" }, ["+" + rest + " more"]));
    if (online.length === 0) ul.appendChild(el("li", { class: "sg-more" }, ["Nobody is online."]));
  };

  // renderUnlisted says why no names are shown for an answer of /status
  // without its list of players: nobody is online, the gateway hid the list
  // (meta.hiddenFields names it), or the answer has none.
  Widget.prototype.renderUnlisted = function (count, hidden) {
    var ul = this.pub.players;
    ul.textContent = "";
    var why = count === 0 ? "Nobody is online."
      : Array.isArray(hidden) && hidden.indexOf("online") >= 0 ? "Who is online is hidden from visitors without a key."
      : "The server does not say who is online.";
    ul.appendChild(el("li", { class: "sg-more" }, [why]));
  };

  // showNetwork shows an answer of /network: the total, and each server's
  // count (the players' UUIDs, when public, name no one here: each server
  // has players of its own), a server that does not answer, and what the
  // gateway hid.
  Widget.prototype.showNetwork = function (r) {
    var p = this.pub;
    if (!r.ok) {
      this.state(p.state, "error", r.text);
      return;
    }
    var d = r.data || {};
    var servers = Array.isArray(d.servers) ? d.servers : [];
    var down = Array.isArray(r.meta.unreachable) ? r.meta.unreachable : [];
    p.online.textContent = typeof d.totalOnline === "number" ? String(d.totalOnline) : "–";
    p.servers.textContent = String(typeof d.serverCount === "number" ? d.serverCount : servers.length);
    var discord = servers.map(function (s) { return s.discord; }).filter(function (n) { return typeof n === "number"; });
    p.discord.textContent = discord.length ? String(discord[0]) : "–"; // one guild for the network
    var ul = p.serverList;
    ul.textContent = "";
    servers.forEach(function (s) {
      var n = typeof s.online === "number" ? s.online : Array.isArray(s.players) ? s.players.length : null;
      ul.appendChild(el("li", { "data-server": plain(s.server) }, [
        el("strong", {}, [plain(s.server)]), " " + (n === null ? "–" : n) + " online",
      ]));
    });
    down.forEach(function (id) {
      ul.appendChild(el("li", { class: "sg-more", "data-server": plain(id) }, [plain(id) + " is not answering"]));
    });
    if (!servers.length && !down.length) ul.appendChild(el("li", { class: "sg-more" }, ["No server is up."]));
    this.hidden.network = r.meta.hiddenFields;
    this.renderHidden();
    this.state(p.state, "ok", "Updated " + clock(new Date()));
  };

  // renderHidden shows meta.hiddenFields: what the gateway removed from the
  // public answers, per endpoint.
  Widget.prototype.renderHidden = function () {
    var parts = [];
    for (var ep of Object.keys(this.hidden).sort()) { // the same order whichever came first
      var f = this.hidden[ep];
      if (Array.isArray(f) && f.length) parts.push(ep + ": " + f.join(", "));
    }
    var node = this.pub.hidden;
    node.hidden = parts.length === 0;
    node.textContent = parts.length ? "Hidden from visitors without a key: " + parts.join("; ") + "." : "";
  };

  Widget.prototype.forget = function (why) {
    var s = this.st;
    this.key = "";
    s.forget.disabled = true;
    s.server.hidden = true;
    s.bans.hidden = true;
    s.server.textContent = "";
    s.bans.textContent = "";
    this.state(s.state, "idle", why);
  };

  Widget.prototype.refreshStaff = function () {
    var self = this, s = this.st, key = this.key;
    if (this.busy) return Promise.resolve();
    this.busy = true;
    return Promise.all([this.call("/api/v1/server", key), this.call("/api/v1/performance", key), this.call("/api/v1/bans", key)])
      .then(function (rs) {
        if (key !== self.key) return; // forgotten or replaced meanwhile
        var server = rs[0], perf = rs[1], bans = rs[2];
        var refused = rs.filter(function (r) { return !r.ok; });
        // A public endpoint answers a wrong key too, without its protected
        // fields: meta.authenticated is what says whether the key counted.
        var accepted = rs.some(function (r) { return r.ok && r.meta.authenticated === true; });
        var keyRefused = refused.length > 0 && refused.every(function (r) { return r.status === 401 || r.status === 404; });
        if (!accepted && keyRefused) {
          self.forget("Refused: " + refused[0].text + ". The key has been dropped; type it again.");
          s.state.setAttribute("data-state", "error");
          return;
        }
        self.renderServer(server, perf);
        self.renderBans(bans);
        if (refused.length) {
          self.state(s.state, "error", refused.map(function (r) { return r.text; }).join(" · "));
        } else {
          self.state(s.state, "ok", "Key accepted: every field shown. Updated " + clock(new Date()));
        }
      })
      .catch(function (e) {
        self.state(s.state, "error", "Unexpected answer from the API: " + e.message);
      })
      .finally(function () {
        self.busy = false;
        if (self.key && key !== self.key) self.refreshStaff(); // a new key came in meanwhile
      });
  };

  Widget.prototype.renderServer = function (server, perf) {
    var dl = this.st.server;
    if (!server.ok) return; // keep what was shown; the state line says why
    var d = server.data || {};
    var rows = [
      ["Server", plain(d.brand) + " " + plain(d.minecraftVersion)],
      ["Players", (this.pub.online.textContent || "?") + " / " + d.maxPlayers],
      ["MOTD", plain(d.motd)],
      ["Online mode", d.onlineMode ? "yes" : "no"],
    ];
    if (perf.ok && perf.data && perf.data.memory) {
      rows.push(["Memory", perf.data.memory.usedMB + " / " + perf.data.memory.maxMB + " MB"]);
    }
    dl.textContent = "";
    rows.forEach(function (row) {
      dl.appendChild(el("dt", {}, [row[0]]));
      dl.appendChild(el("dd", {}, [row[1]]));
    });
    dl.hidden = false;
  };

  Widget.prototype.renderBans = function (bans) {
    var ul = this.st.bans;
    if (!bans.ok) return;
    var players = (bans.data && bans.data.players) || {};
    var ips = (bans.data && bans.data.ips) || {};
    var entries = Array.isArray(players.entries) ? players.entries : [];
    ul.textContent = "";
    ul.appendChild(el("li", { class: "sg-head" }, [
      "Bans: " + entries.length + " player" + (entries.length === 1 ? "" : "s") +
      (typeof ips.count === "number" ? ", " + ips.count + " IP" + (ips.count === 1 ? "" : "s") : ""),
    ]));
    entries.forEach(function (b) {
      var until = b.expires ? "until " + new Date(b.expires).toLocaleDateString() : "permanent";
      ul.appendChild(el("li", {}, [
        el("strong", {}, [plain(b.name || b.uuid || "?")]),
        " " + plain(b.reason || "no reason") + " (" + until + (b.source ? ", by " + plain(b.source) : "") + ")",
      ]));
    });
    ul.hidden = false;
  };

  function start() {
    document.querySelectorAll(".statusgate[data-api]").forEach(function (root) { new Widget(root); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
