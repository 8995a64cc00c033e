# localai_gallery.py - a LocalAI-style client against `blockdraft serve`
# (run by tests/e2e/server_localai.sh): apply -> poll the job -> list ->
# delete, against a loopback gallery (tests/e2e/lib/gallery_server.py),
# every answer decoded with the Go types LocalAI's server encodes and its
# clients decode (written from LocalAI's sources and docs, not from our
# output):
#   core/schema      GalleryResponse {ID string `json:"uuid"`; StatusURL string `json:"status"`}
#   core/services    GalleryOpStatus {Deletion bool "deletion"; FileName string "file_name";
#                    Error error "error"; Processed bool "processed"; Message string "message";
#                    Progress float64 "progress"; TotalFileSize string "file_size";
#                    DownloadedFileSize string "downloaded_size"; GalleryElementName string
#                    "gallery_element_name"; Cancelled bool "cancelled"; Cancellable bool "cancellable"}
#   core/gallery     GalleryModel {URL, Name, Description, License string; URLs []string; Icon string;
#                    Tags []string; ConfigFile, Overrides map[string]interface{};
#                    AdditionalFiles []File "files"; Gallery config.Gallery "gallery"; Installed bool}
#                    File {Filename "filename", SHA256 "sha256", URI "uri" string}
#   core/config      Gallery {URL string "url"; Name string "name"}
# and LocalAI's downloader's size strings ("%d B", else "%.1f %ciB").
# GET /models/jobs is map[string]GalleryOpStatus; /models/available is
# []GalleryModel; /models/galleries is []Gallery.
import hashlib
import http.client
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import (DRAFTER, TARGET, Server, check, finish, jbody, request, tmpdir)

T = tmpdir()
ROOT = os.environ["BD_ROOT"]


# --- encoding/json, as a Go client decodes into LocalAI's types --------------
class GoDecodeError(Exception):
    pass


def go_decode(v, t, path="$"):
    """Decode JSON value v into Go type t the way encoding/json would:
    null leaves a string/bool/float64/slice/map/struct at its zero value;
    a JSON value of another type is an UnmarshalTypeError. t is "string",
    "bool", "float64", "error" (an interface: null only, or an object, which
    is what LocalAI's server writes for a non-nil Go error -- that a Go client
    cannot decode it is LocalAI's own behaviour), ("slice", t),
    ("map", t) (keys are strings), "any", or a dict of json-name -> t
    (a struct; unknown fields are ignored)."""
    if t == "any":
        return v
    if v is None:
        return None
    if t == "string":
        if not isinstance(v, str):
            raise GoDecodeError("%s: cannot unmarshal %s into string" % (path, type(v).__name__))
    elif t == "bool":
        if not isinstance(v, bool):
            raise GoDecodeError("%s: cannot unmarshal %s into bool" % (path, type(v).__name__))
    elif t == "float64":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise GoDecodeError("%s: cannot unmarshal %s into float64" % (path, type(v).__name__))
    elif t == "error":
        if not isinstance(v, dict):
            raise GoDecodeError("%s: LocalAI writes a Go error as an object, got %s" % (path, type(v).__name__))
    elif isinstance(t, tuple) and t[0] == "slice":
        if not isinstance(v, list):
            raise GoDecodeError("%s: cannot unmarshal %s into slice" % (path, type(v).__name__))
        for i, x in enumerate(v):
            go_decode(x, t[1], "%s[%d]" % (path, i))
    elif isinstance(t, tuple) and t[0] == "map":
        if not isinstance(v, dict):
            raise GoDecodeError("%s: cannot unmarshal %s into map" % (path, type(v).__name__))
        for k, x in v.items():
            go_decode(x, t[1], "%s.%s" % (path, k))
    elif isinstance(t, dict):
        if not isinstance(v, dict):
            raise GoDecodeError("%s: cannot unmarshal %s into struct" % (path, type(v).__name__))
        for k, ft in t.items():
            if k in v:
                go_decode(v[k], ft, path + "." + k)
    else:
        raise AssertionError("unknown type %r" % (t,))
    return v


GalleryResponse = {"uuid": "string", "status": "string"}
GalleryOpStatus = {"deletion": "bool", "file_name": "string", "error": "error", "processed": "bool",
                   "message": "string", "progress": "float64", "file_size": "string", "downloaded_size": "string",
                   "gallery_element_name": "string", "cancelled": "bool", "cancellable": "bool"}
File = {"filename": "string", "sha256": "string", "uri": "string"}
Gallery = {"url": "string", "name": "string"}
GalleryModel = {"url": "string", "name": "string", "description": "string", "license": "string",
                "urls": ("slice", "string"), "icon": "string", "tags": ("slice", "string"),
                "config_file": ("map", "any"), "overrides": ("map", "any"), "files": ("slice", File),
                "gallery": Gallery, "installed": "bool"}


def decodes(v, t):
    try:
        go_decode(v, t)
        return True, ""
    except GoDecodeError as e:
        return False, str(e)


def localai_bytes(n):
    """LocalAI's downloader (pkg/downloader formatBytes): "%d B" below 1024,
    else one decimal and a binary prefix."""
    if n < 1024:
        return "%d B" % n
    div, exp, m = 1024, 0, n // 1024
    while m >= 1024:
        div *= 1024
        exp += 1
        m //= 1024
    return "%.1f %siB" % (n / div, "KMGTPE"[exp])


check(localai_bytes(512) == "512 B" and localai_bytes(1536) == "1.5 KiB" and localai_bytes(3 << 20) == "3.0 MiB",
      "the size formatter of this test follows LocalAI's")


def sha(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


# --- the loopback gallery --------------------------------------------------------
www = os.path.join(T, "www")
os.makedirs(os.path.join(www, "stories"))
for src, dst in ((TARGET, "target.gguf"), (DRAFTER, "drafter.gguf")):
    with open(src, "rb") as f, open(os.path.join(www, "stories", dst), "wb") as g:
        g.write(f.read())
gs = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "e2e", "lib", "gallery_server.py"), www,
                       os.path.join(T, "gport"), os.path.join(T, "greq.log")])
for _ in range(200):
    if os.path.exists(os.path.join(T, "gport")):
        break
    time.sleep(0.05)
GP = int(open(os.path.join(T, "gport")).read())
G = "http://127.0.0.1:%d/files" % GP
TSHA, DSHA = sha(TARGET), sha(DRAFTER)
CONFIG = """backend: llama-cpp
parameters:
  model: stories/stories260K.gguf
draft_model: stories/stories260K-dflash.gguf
options:
  - use_jinja:true
  - spec_type:draft-dflash
  - spec_n_max:7
"""
FILES = """- filename: stories/stories260K.gguf
  sha256: %s
  uri: %s/stories/target.gguf
- filename: stories/stories260K-dflash.gguf
  sha256: %s
  uri: %s/stories/drafter.gguf
""" % (TSHA, G, DSHA, G)


def indent(text, n):
    return "".join(" " * n + l + "\n" for l in text.splitlines())


INDEX_URL = G + "/localai.yaml"
open(os.path.join(www, "localai.yaml"), "w").write(
    "- name: stories-dflash\n"
    "  url: github:mudler/LocalAI/gallery/virtual.yaml@master\n"
    "  description: stories260K with its DFlash drafter\n"
    "  license: mit\n"
    "  icon: https://example.com/stories.png\n"
    "  urls: [https://huggingface.co/karpathy/tinyllamas]\n"
    "  tags: [llm, gguf, dflash]\n"
    "  overrides:\n" + indent(CONFIG, 4) + "  files:\n" + indent(FILES, 4))
# a gallery model definition (the `url` of /models/apply): config_file as YAML text, as LocalAI's are
open(os.path.join(www, "stories-def.yaml"), "w").write(
    "name: stories-def\ndescription: defined by URL\nlicense: mit\nconfig_file: |\n" + indent(CONFIG, 2) +
    "files:\n" + FILES)
# a model config (the `config_url`): LocalAI's download_files list the files
open(os.path.join(www, "stories-config.yaml"), "w").write("name: stories-cfg\n" + CONFIG + "download_files:\n" + FILES)
# a second index given as a local path: its paths must never be shown
local_index = os.path.join(T, "local.yaml")
open(local_index, "w").write("""- name: local-only
  url: github:mudler/LocalAI/gallery/virtual.yaml@master
  description: files on this machine
  overrides:
    parameters:
      model: l/t.gguf
  files:
    - filename: l/t.gguf
      sha256: %s
      uri: file://%s
""" % (TSHA, TARGET))
models = os.path.join(T, "models")
os.makedirs(models)
env = {"BLOCKDRAFT_GALLERY": INDEX_URL + "," + local_index, "BLOCKDRAFT_STALL_TIMEOUT": "5",
       "BLOCKDRAFT_RETRY_DELAY_MS": "50", "BLOCKDRAFT_RETRIES": "2"}
s = Server(T, "localai", ["--models-dir", models, "-t", "1", "-c", "512"], env=env)
p = s.port


def get(path):
    st, h, b = request(p, "GET", path)
    return st, jbody(b), b


def apply(body):
    st, h, b = request(p, "POST", "/models/apply", body)
    return st, jbody(b)


def poll(status_url, limit=30):
    """Follow the absolute status URL until the job is processed."""
    u = urllib.parse.urlsplit(status_url)
    t0 = time.time()
    while time.time() - t0 < limit:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        c.request("GET", u.path)
        r = c.getresponse()
        b = r.read()
        c.close()
        j = jbody(b)
        if r.status != 200:
            return r.status, j
        if j.get("processed"):
            return 200, j
        time.sleep(0.05)
    return 0, None


UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def started(st, j, what):
    ok, why = decodes(j, GalleryResponse) if isinstance(j, dict) else (False, "not an object")
    u = urllib.parse.urlsplit(j["status"]) if ok and j.get("status") else None
    good = st == 200 and ok and UUID.match(j.get("uuid") or "") is not None and u is not None and \
        u.scheme == "http" and u.netloc == "127.0.0.1:%d" % p and u.path == "/models/jobs/" + j["uuid"]
    check(good, "%s: GalleryResponse {uuid, status: absolute job URL} (%s %s)" % (what, j, why))
    return good


def finished_ok(j, what, element):
    ok, why = decodes(j, GalleryOpStatus)
    check(ok and j["processed"] is True and j["error"] is None and j["message"] == "completed" and
          j["progress"] == 100 and j["deletion"] is False and j["gallery_element_name"] == element and
          j["cancelled"] is False, "%s: job done, GalleryOpStatus types (%s %s)" % (what, why, j))


# galleries
st, j, b = get("/models/galleries")
ok, why = decodes(j, ("slice", Gallery))
names = {g["name"]: g["url"] for g in j} if ok else {}
check(st == 200 and ok and names.get("localai") == INDEX_URL and names.get("local") == "" and "blockdraft" in names,
      "GET /models/galleries: []Gallery {name, url}; a local index shows no path (%s)" % names)

# available
st, j, b = get("/models/available")
ok, why = decodes(j, ("slice", GalleryModel))
e = [x for x in (j or []) if x.get("name") == "stories-dflash"]
check(st == 200 and ok and len(e) == 1, "GET /models/available: []GalleryModel (%s)" % why)
e = e[0] if e else {}
check(e.get("gallery") == {"name": "localai", "url": INDEX_URL} and e.get("license") == "mit" and
      e.get("icon") == "https://example.com/stories.png" and e.get("tags") == ["llm", "gguf", "dflash"] and
      e.get("urls") == ["https://huggingface.co/karpathy/tinyllamas"] and
      e.get("url") == "github:mudler/LocalAI/gallery/virtual.yaml@master" and not e.get("installed"),
      "available entry: gallery {name, url}, license, icon, tags, urls, url, not installed")
check([f["uri"] for f in e.get("files", [])] == [G + "/stories/target.gguf", G + "/stories/drafter.gguf"] and
      [f["sha256"] for f in e.get("files", [])] == [TSHA, DSHA] and
      e.get("overrides", {}).get("parameters", {}).get("model") == "stories/stories260K.gguf",
      "available entry: files {filename, sha256, uri} and overrides")
lo = [x for x in (j or []) if x.get("name") == "local-only"]
check(len(lo) == 1 and lo[0]["files"][0]["uri"] == "" and T.encode() not in b and b"/work/" not in b,
      "GET /models/available never shows a path of the server's machine")

# apply by gallery@name
st, j = apply({"id": "localai@stories-dflash"})
if started(st, j, "apply localai@stories-dflash"):
    uid = j["uuid"]
    st, job = poll(j["status"])
    finished_ok(job, "apply localai@stories-dflash", "localai@stories-dflash")
    check(job["file_size"] in (localai_bytes(os.path.getsize(TARGET)), localai_bytes(os.path.getsize(DRAFTER))) and
          job["downloaded_size"] == job["file_size"], "job sizes are LocalAI's strings (%r, %r)" %
          (job["file_size"], job["downloaded_size"]))
    st, jobs, _ = get("/models/jobs")
    ok, why = decodes(jobs, ("map", GalleryOpStatus))
    check(st == 200 and ok and uid in jobs and jobs[uid]["processed"] is True,
          "GET /models/jobs: map[string]GalleryOpStatus with the job (%s)" % why)
st, j, _ = get("/v1/models")
m = {x["id"]: x for x in j["data"]}
check("stories-dflash" in m and m["stories-dflash"]["status"]["value"] == "unloaded",
      "/v1/models lists the installed model, status unloaded")
CHAT = {"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 4, "temperature": 0}
st, _, b = request(p, "POST", "/v1/chat/completions", dict(CHAT, model="stories-dflash"))
check(st == 200 and jbody(b)["speculative"]["type"] == "draft-dflash", "the installed model serves with its drafter")
st, j, _ = get("/v1/models")
check({x["id"]: x for x in j["data"]}["stories-dflash"]["status"]["value"] == "loaded", "then it is listed loaded")

# apply with a name override and overrides merged into the config
st, j = apply({"id": "localai@stories-dflash", "name": "my-stories", "overrides": {"parameters": {"temperature": 0}}})
if started(st, j, "apply with name and overrides"):
    st, job = poll(j["status"])
    finished_ok(job, "apply with name and overrides", "localai@stories-dflash")
    cfg = open(os.path.join(models, "my-stories.yaml")).read() if os.path.exists(
        os.path.join(models, "my-stories.yaml")) else ""
    check("name: my-stories" in cfg and re.search(r"temperature: *0\b", cfg) and "spec_type:draft-dflash" in cfg,
          "installed as my-stories; overrides merged into its config")
st, _, b = request(p, "POST", "/v1/chat/completions", dict(CHAT, model="my-stories"))
check(st == 200, "my-stories serves")

# apply from a model definition URL, and from a model config URL
st, j = apply({"url": G + "/stories-def.yaml", "name": "from-url"})
if started(st, j, "apply url"):
    st, job = poll(j["status"])
    finished_ok(job, "apply url (definition with config_file text)", "from-url")
st, j = apply({"config_url": G + "/stories-config.yaml"})
if started(st, j, "apply config_url"):
    st, job = poll(j["status"])
    finished_ok(job, "apply config_url (download_files)", G + "/stories-config.yaml")
st, j = apply({"url": "github:mudler/LocalAI/gallery/virtual.yaml@master", "name": "virtual",
               "overrides": {"parameters": {"model": "stories/stories260K.gguf"}},
               "files": [{"filename": "stories/stories260K.gguf", "sha256": TSHA, "uri": G + "/stories/target.gguf"}]})
if started(st, j, "apply virtual url + overrides + files"):
    st, job = poll(j["status"])
    finished_ok(job, "apply LocalAI's empty base with overrides and files", "virtual")
st, j, _ = get("/v1/models")
ids = {x["id"] for x in j["data"]}
check({"stories-dflash", "my-stories", "from-url", "stories-cfg", "virtual"} <= ids, "all five listed (%s)" % ids)
for name in ("from-url", "stories-cfg", "virtual"):
    st, _, b = request(p, "POST", "/v1/chat/completions", dict(CHAT, model=name))
    check(st == 200, "%s serves" % name)

# failures: a job error (LocalAI: error set, message "error: ...") or a 400
st, j = apply({"id": "nogallery@stories-dflash"})
if started(st, j, "apply from an unknown gallery"):
    st, job = poll(j["status"])
    ok, why = decodes(job, GalleryOpStatus)
    check(ok and job["processed"] and isinstance(job["error"], dict) and job["message"].startswith("error: ") and
          "nogallery" in job["message"], "unknown gallery: job fails, error set, message 'error: ...' (%s)" % job)
for body, what in [({"url": "file:///etc/passwd"}, "a file:// url"),
                   ({"config_url": "/etc/passwd"}, "a local config_url"),
                   ({"id": "localai@stories-dflash", "files": [{"filename": "x", "sha256": TSHA,
                                                                 "uri": "file:///etc/passwd"}]}, "a file:// file uri"),
                   ({"id": "../evil"}, "a path as name"), ({"id": "localai@ok", "name": "../x"}, "a path as new name"),
                   ({}, "nothing to install")]:
    st, h, b = request(p, "POST", "/models/apply", body)
    check(st == 400, "apply with %s -> 400" % what)
st, _, b = request(p, "GET", "/models/jobs/00000000-0000-4000-8000-000000000000")
check(st == 404, "unknown job -> 404")

# delete
st, h, b = request(p, "POST", "/models/delete/my-stories")
j = jbody(b)
if started(st, j, "delete my-stories"):
    st, job = poll(j["status"])
    ok, why = decodes(job, GalleryOpStatus)
    check(ok and job["deletion"] is True and job["processed"] and job["error"] is None and
          job["gallery_element_name"] == "my-stories", "delete job: deletion true, done (%s)" % job)
st, j, _ = get("/v1/models")
check("my-stories" not in {x["id"] for x in j["data"]} and not os.path.exists(os.path.join(models, "my-stories.yaml")),
      "deleted: gone from /v1/models and the models folder")
st, _, b = request(p, "POST", "/v1/chat/completions", dict(CHAT, model="my-stories"))
check(st == 404, "a deleted model is no longer served (loaded before: 404 now)")
check(os.path.exists(os.path.join(models, "stories", "stories260K.gguf")), "files other models use are kept")
st, h, b = request(p, "POST", "/models/delete/ghost")
j = jbody(b)
if started(st, j, "delete an unknown model"):
    st, job = poll(j["status"])
    check(job["processed"] and isinstance(job["error"], dict) and job["deletion"] is True,
          "deleting an unknown model: the job reports an error")
st, h, b = request(p, "POST", "/models/delete/..")
check(st == 400, "delete with a bad name -> 400")
check(s.stop() == 0, "server: clean exit")
gs.kill()
gs.wait()
import shutil
shutil.rmtree(T, ignore_errors=True)
finish()
