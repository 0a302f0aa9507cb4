// The chat page: sends messages, files and voice recordings, and shows
// the chat as the server streams it. Text from the model or anyone else
// is only ever set as textContent, never as HTML.
(function () {
  "use strict";
  var csrf = document.querySelector('meta[name="csrf-token"]').content;
  var log = document.getElementById("log");
  var state = document.getElementById("state");
  var working = document.getElementById("working");
  var errorLine = document.getElementById("error");
  var form = document.getElementById("composer");
  var text = document.getElementById("text");
  var fileInput = document.getElementById("file");
  var attached = document.getElementById("attached");
  var recordButton = document.getElementById("record");
  var drafts = {}; // draft reference -> {el, v}

  function newId() {
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return Array.prototype.map.call(b, function (x) { return ("0" + x.toString(16)).slice(-2); }).join("");
  }

  function showError(msg) {
    errorLine.textContent = msg || "";
    errorLine.hidden = !msg;
  }

  function fileURL(name, play) {
    return "/chat/file?name=" + encodeURIComponent(name) + (play ? "&play=1" : "");
  }

  function bubble(cls) {
    var el = document.createElement("div");
    el.className = "msg " + cls;
    log.appendChild(el);
    return el;
  }

  function addText(el, t) {
    var p = document.createElement("div");
    p.className = "text";
    p.textContent = t;
    el.appendChild(p);
    return p;
  }

  function addAudio(el, name) {
    var a = document.createElement("audio");
    a.controls = true;
    a.preload = "none";
    a.src = fileURL(name, true);
    el.appendChild(a);
  }

  function addLink(el, label, name) {
    var a = document.createElement("a");
    a.href = fileURL(name, false);
    a.textContent = label;
    a.setAttribute("download", name);
    el.appendChild(a);
  }

  function post(url, data, tries) {
    return fetch(url, { method: "POST", body: data, headers: { "X-CSRF-Token": csrf }, credentials: "same-origin" })
      .then(function (resp) {
        return resp.json().catch(function () { return {}; }).then(function (body) {
          if (resp.status === 503 && tries > 1) {
            return new Promise(function (ok) { setTimeout(ok, 1500); }).then(function () { return post(url, data, tries - 1); });
          }
          if (!resp.ok) { throw new Error(body.message || ("The server answered " + resp.status + ".")); }
          return body;
        });
      }, function (err) {
        // The request may or may not have arrived: the same id is sent
        // again, and the server takes it once.
        if (tries > 1) {
          return new Promise(function (ok) { setTimeout(ok, 1500); }).then(function () { return post(url, data, tries - 1); });
        }
        throw new Error("The message could not be sent: check the connection and send it again.");
      });
  }

  function press(approval, choice, box) {
    var buttons = box.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    var data = new FormData();
    data.append("id", newId());
    data.append("approval", approval);
    data.append("choice", choice);
    post("/chat/answer", data, 3).then(function () { showError(""); }, function (err) {
      showError(err.message);
      buttons.forEach(function (b) { b.disabled = false; });
    });
  }

  function show(e) {
    switch (e.kind) {
      case "you": {
        var el = bubble("you");
        el.dataset.id = String(e.id);
        if (e.text) { addText(el, e.text); }
        (e.files || []).forEach(function (f) { addLink(el, "Attached: " + f, f); });
        if (e.voice) { addText(el, "(voice message)"); addAudio(el, e.voice); }
        break;
      }
      case "answer": {
        var d = e.replaces && drafts[e.replaces];
        var el2;
        if (d) {
          el2 = d.el;
          el2.classList.remove("draft");
          el2.textContent = "";
          delete drafts[e.replaces];
        } else {
          el2 = bubble("bot");
        }
        addText(el2, e.text);
        break;
      }
      case "draft": {
        var dr = drafts[e.ref];
        if (!dr) {
          dr = drafts[e.ref] = { el: bubble("bot draft"), v: 0 };
        }
        if (e.v >= dr.v) {
          dr.v = e.v;
          dr.el.textContent = e.text;
        }
        break;
      }
      case "ask": {
        var q = bubble("bot ask");
        q.dataset.approval = e.approval;
        addText(q, e.text);
        var box = document.createElement("div");
        box.className = "buttons";
        var choices = [["approve", "Approve "], ["deny", "Deny "]];
        if (e.always) {
          choices.push(["always", "Always allow "]);
        }
        choices.forEach(function (c) {
          var b = document.createElement("button");
          b.type = "button";
          b.className = c[0];
          b.textContent = c[1] + e.code;
          b.addEventListener("click", function () { press(e.approval, c[0], box); });
          box.appendChild(b);
        });
        q.appendChild(box);
        break;
      }
      case "closed": {
        document.querySelectorAll(".msg.ask").forEach(function (q2) {
          if (q2.dataset.approval !== e.approval) { return; }
          var bx = q2.querySelector(".buttons");
          if (bx) { bx.remove(); }
          var n = document.createElement("div");
          n.className = "closed";
          n.textContent = e.text;
          q2.appendChild(n);
        });
        break;
      }
      case "file": {
        var f = bubble("bot file");
        addLink(f, "Download " + (e.name || e.file), e.file);
        break;
      }
      case "voice": {
        var v = bubble("bot voice");
        addText(v, "Spoken answer");
        addAudio(v, e.file);
        break;
      }
      case "unsent": {
        document.querySelectorAll(".msg.you").forEach(function (m) {
          if (m.dataset.id === e.ref) { m.remove(); }
        });
        break;
      }
      case "working":
        working.hidden = !e.on;
        break;
    }
    window.scrollTo(0, document.body.scrollHeight);
  }

  function connect() {
    var es = new EventSource("/chat/stream");
    es.onopen = function () { state.textContent = "Connected"; state.classList.remove("off"); };
    es.onerror = function () {
      state.textContent = "Reconnecting…";
      state.classList.add("off");
      if (es.readyState === EventSource.CLOSED) {
        // Refused (a restart under way, too many tabs): the browser
        // gives up, so the page starts again with the whole history.
        setTimeout(function () {
          log.textContent = "";
          drafts = {};
          working.hidden = true;
          connect();
        }, 3000);
      }
    };
    es.onmessage = function (m) {
      var e;
      try { e = JSON.parse(m.data); } catch (err) { return; }
      show(e);
    };
  }

  function send(data) {
    showError("");
    data.append("id", newId());
    return post("/chat/send", data, 3).catch(function (err) { showError(err.message); throw err; });
  }

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var data = new FormData();
    data.append("text", text.value);
    Array.prototype.forEach.call(fileInput.files, function (f) { data.append("file", f, f.name); });
    if (!text.value.trim() && fileInput.files.length === 0) { return; }
    var typed = text.value;
    text.value = "";
    send(data).then(function () {
      fileInput.value = "";
      attached.textContent = "";
    }, function () { text.value = typed; });
  });

  text.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });

  fileInput.addEventListener("change", function () {
    attached.textContent = Array.prototype.map.call(fileInput.files, function (f) { return f.name; }).join(", ");
  });

  // Voice: recorded in the browser as WebM/Opus, sent as a voice note.
  var recorder = null;
  recordButton.addEventListener("click", function () {
    if (recorder) { recorder.stop(); return; }
    if (!navigator.mediaDevices || !window.MediaRecorder) {
      showError("This browser cannot record here (recording needs HTTPS or localhost).");
      return;
    }
    navigator.mediaDevices.getUserMedia({ audio: true }).then(function (stream) {
      var type = MediaRecorder.isTypeSupported("audio/webm;codecs=opus") ? "audio/webm;codecs=opus" : "";
      var chunks = [];
      recorder = type ? new MediaRecorder(stream, { mimeType: type }) : new MediaRecorder(stream);
      recorder.ondataavailable = function (ev) { if (ev.data.size > 0) { chunks.push(ev.data); } };
      recorder.onstop = function () {
        stream.getTracks().forEach(function (t) { t.stop(); });
        recorder = null;
        recordButton.textContent = "Record voice";
        recordButton.classList.remove("recording");
        var blob = new Blob(chunks, { type: "audio/webm" });
        if (blob.size === 0) { return; }
        var data = new FormData();
        data.append("voice", blob, "voice.webm");
        send(data);
      };
      recorder.start();
      recordButton.textContent = "Stop and send";
      recordButton.classList.add("recording");
    }, function () {
      showError("The microphone is not available: allow it for this page and try again.");
    });
  });

  connect();
})();
