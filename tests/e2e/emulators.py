"""Object-store emulators for the tests and benchmarks: moto's S3 server,
Azurite (Azure Blob) and fake-gcs-server, as installed by
scripts/install-emulators.sh, each started on a free loopback port with one
bucket (container) made, plus a counting HTTP proxy that can stand in front
of any of them.

Each emulator gives `url(prefix)` (a moraine store URL in its bucket) and
`env` (the variables moraine reads for that cloud). pause() / resume() stop
and continue the emulator process (SIGSTOP / SIGCONT): to its clients the
endpoint stops answering and later comes back with its state intact, which
is what an object-store outage looks like from the client side. (moto keeps
its state in memory only, so a real stop and restart would lose the store.)
"""
import base64
import email.utils
import hashlib
import hmac
import http.client
import http.server
import json
import os
import pathlib
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPS = ROOT / ".deps"
BUCKET = "moraine"
START_TIMEOUT_S = 60


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(proc, port, what):
    """Until port accepts connections; a dead or hung start raises."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{what} did not listen on {port} within {START_TIMEOUT_S} s")


def _request(method, port, path, body=b"", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


class Emulator:
    name = "?"
    scheme = "?"

    def __init__(self, argv, port, workdir, env=None):
        self.port = port
        self.workdir = workdir
        self.log = open(workdir / f"{self.name}.log", "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     cwd=workdir, env={**os.environ, **(env or {})})
        _wait_listening(self.proc, port, self.name)
        self.front_port = port  # where clients connect (GCS: a shim)
        self.make_bucket()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.front_port}"

    def url(self, prefix):
        return f"{self.scheme}://{BUCKET}/{prefix}"

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        if self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    @staticmethod
    def env_for(endpoint):
        """The variables moraine reads, pointing at endpoint (the emulator
        itself, or a proxy in front of it)."""
        raise NotImplementedError

    @property
    def env(self):
        return self.env_for(self.endpoint)


class S3(Emulator):
    """moto in server mode: S3 with path-style requests; it accepts any
    credentials."""
    name, scheme = "moto", "s3"

    def __init__(self, workdir):
        port = free_port()
        moto = ROOT / ".venv" / "bin" / "moto_server"
        if not moto.exists():
            raise RuntimeError(f"{moto} missing: run scripts/install-deps.sh")
        super().__init__([str(moto), "-H", "127.0.0.1", "-p", str(port)], port, workdir)

    def make_bucket(self):
        status, body = _request("PUT", self.port, f"/{BUCKET}", headers={"Content-Length": "0"})
        if status != 200:
            raise RuntimeError(f"moto: cannot create bucket: {status} {body[:200]!r}")

    @staticmethod
    def env_for(endpoint):
        return {"AWS_ENDPOINT": endpoint, "AWS_ALLOW_HTTP": "true",
                "AWS_ACCESS_KEY_ID": "moraine", "AWS_SECRET_ACCESS_KEY": "moraine",
                "AWS_REGION": "us-east-1"}


# Azurite's well-known development account (public, the same in every
# Azurite and in Microsoft's documentation).
AZ_ACCOUNT = "devstoreaccount1"
AZ_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq"
          "/K1SZFPTOtr/KBHBeksoGMGw==")


class Azure(Emulator):
    """Azurite's blob service, path-style (http://host/ACCOUNT/CONTAINER),
    checking shared-key signatures; telemetry off."""
    name, scheme = "azurite", "az"

    def __init__(self, workdir):
        port = free_port()
        main = DEPS / "azurite" / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
        if not main.exists():
            raise RuntimeError(f"{main} missing: run scripts/install-deps.sh")
        data = workdir / "azurite-data"
        data.mkdir(exist_ok=True)
        super().__init__(["node", str(main), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                          "--location", str(data), "--silent", "--skipApiVersionCheck",
                          "--disableTelemetry", "--disableProductStyleUrl"], port, workdir)

    def make_bucket(self):
        path = f"/{AZ_ACCOUNT}/{BUCKET}"
        headers = {"x-ms-date": email.utils.formatdate(usegmt=True),
                   "x-ms-version": "2021-08-06", "Content-Length": "0"}
        canon_headers = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items())
                                if k.startswith("x-ms-"))
        # Shared Key string-to-sign: verb, eleven standard headers (all empty
        # here), x-ms-* headers, then /ACCOUNT + path and the query sorted.
        to_sign = "PUT\n" + "\n" * 11 + canon_headers + f"/{AZ_ACCOUNT}{path}\nrestype:container"
        sig = base64.b64encode(hmac.new(base64.b64decode(AZ_KEY), to_sign.encode(),
                                        hashlib.sha256).digest()).decode()
        headers["Authorization"] = f"SharedKey {AZ_ACCOUNT}:{sig}"
        status, body = _request("PUT", self.port, path + "?restype=container", headers=headers)
        if status != 201:
            raise RuntimeError(f"azurite: cannot create container: {status} {body[:300]!r}")

    @staticmethod
    def env_for(endpoint):
        return {"AZURE_STORAGE_USE_EMULATOR": "true", "AZURITE_BLOB_STORAGE_URL": endpoint}


class GCS(Emulator):
    """fake-gcs-server over plain http, unauthenticated, on a folder, behind a
    proxy that turns object_store's XML-API uploads into the JSON-API uploads
    fake-gcs-server serves (see _gcs_upload); everything else passes as is."""
    name, scheme = "fake-gcs-server", "gs"

    def make_bucket(self):
        self._make_bucket()
        self.shim = CountingProxy(self.port, gcs_uploads=True)
        self.front_port = self.shim.port

    def stop(self):
        super().stop()
        self.shim.stop()

    def __init__(self, workdir):
        port = free_port()
        exe = DEPS / "bin" / "fake-gcs-server"
        if not exe.exists():
            raise RuntimeError(f"{exe} missing: run scripts/install-deps.sh")
        data = workdir / "gcs-data"
        data.mkdir(exist_ok=True)
        super().__init__([str(exe), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
                          "-backend", "filesystem", "-filesystem-root", str(data),
                          "-public-host", f"127.0.0.1:{port}",
                          "-external-url", f"http://127.0.0.1:{port}", "-log-level", "error"],
                         port, workdir)

    def _make_bucket(self):
        status, body = _request("POST", self.port, "/storage/v1/b?project=moraine",
                                body=json.dumps({"name": BUCKET}).encode(),
                                headers={"Content-Type": "application/json"})
        if status != 200:
            raise RuntimeError(f"fake-gcs-server: cannot create bucket: {status} {body[:200]!r}")

    @staticmethod
    def env_for(endpoint):
        # A service-account key with disable_oauth: object_store's way to an
        # unauthenticated emulator. (GOOGLE_SKIP_SIGNATURE covers reads only:
        # a write would still ask the metadata service for a token.)
        key = {"gcs_base_url": endpoint, "disable_oauth": True, "client_email": "emulator",
               "private_key": "none", "private_key_id": "none"}
        return {"GOOGLE_SERVICE_ACCOUNT_KEY": json.dumps(key)}


CLOUDS = {"s3": S3, "gs": GCS, "az": Azure}


def start(kind, workdir=None):
    workdir = pathlib.Path(workdir or tempfile.mkdtemp(prefix=f"moraine-{kind}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    return CLOUDS[kind](workdir)


# ---- a counting proxy ----------------------------------------------------------


class Counts:
    """Requests and bytes through a CountingProxy, by kind: PUT, GET (object
    reads, ranged or whole), HEAD, LIST, DELETE, POST."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = {}
        self.bytes_up = 0    # request bodies: what the client sent
        self.bytes_down = 0  # response bodies: what the client received

    def add(self, kind, up, down):
        with self.lock:
            self.requests[kind] = self.requests.get(kind, 0) + 1
            self.bytes_up += up
            self.bytes_down += down

    def snapshot(self):
        with self.lock:
            return dict(self.requests), self.bytes_up, self.bytes_down

    def reset(self):
        with self.lock:
            self.requests, self.bytes_up, self.bytes_down = {}, 0, 0


def request_kind(method, target):
    """A request as the clouds bill it: a listing is a LIST whatever the
    method it rides on (S3 list-type, Azure comp=list, GCS XML or JSON)."""
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
    if method == "GET" and ("list-type" in q or q.get("comp") == ["list"] or "prefix" in q
                            or "delimiter" in q):
        return "LIST"
    return method


def _gcs_upload(method, target, headers):
    """fake-gcs-server lacks the XML API's object upload (PUT /BUCKET/OBJECT,
    precondition in x-goog-if-generation-match), which object_store's GCS
    client writes with. The same upload in the JSON API it does serve:
    POST /upload/storage/v1/b/BUCKET/o?uploadType=media&name=OBJECT
    &ifGenerationMatch=N. None when the request is not such an upload."""
    split = urllib.parse.urlsplit(target)
    bucket, _, obj = split.path.lstrip("/").partition("/")
    if method != "PUT" or split.query or not obj:
        return None
    q = {"uploadType": "media", "name": urllib.parse.unquote(obj)}
    gen = headers.get("x-goog-if-generation-match")
    if gen is not None:
        q["ifGenerationMatch"] = gen
    return "POST", f"/upload/storage/v1/b/{bucket}/o?{urllib.parse.urlencode(q)}"


class CountingProxy:
    """A plain-HTTP reverse proxy on a free loopback port that forwards every
    request to upstream_port and counts it. gcs_uploads: translate XML-API
    uploads for fake-gcs-server (_gcs_upload) and answer them as the XML API
    does (ETag and x-goog-generation headers, empty body)."""

    def __init__(self, upstream_port, gcs_uploads=False):
        counts = self.counts = Counts()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("connection", "keep-alive", "host")}
                # the emulator's own address: fake-gcs-server routes by Host
                # (S3 signatures cover Host, but moto does not check them)
                headers["Host"] = f"127.0.0.1:{upstream_port}"
                upload = _gcs_upload(self.command, self.path, self.headers) if gcs_uploads else None
                method, target = upload or (self.command, self.path)
                up = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=120)
                try:
                    up.request(method, target, body=body if n else None, headers=headers)
                    r = up.getresponse()
                    data = r.read()
                finally:
                    up.close()
                out_headers = r.getheaders()
                if upload and r.status == 200:
                    meta = json.loads(data)
                    out_headers = [("ETag", f'"{meta["etag"]}"'),
                                   ("x-goog-generation", str(meta["generation"]))]
                    data = b""
                counts.add(request_kind(self.command, self.path), len(body), len(data))
                self.send_response_only(r.status, r.reason)
                for k, v in out_headers:
                    if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                         "keep-alive"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
