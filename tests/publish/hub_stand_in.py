"""A stand-in for the Hugging Face Hub API on 127.0.0.1: the few endpoints a push uses, recording what it got.

``huggingface_hub`` (without ``hf_xet``) pushes a folder with ``POST /api/repos/create``,
``POST /api/models/<repo>/branch/<name>``, ``POST /api/validate-yaml``, ``POST .../preupload/<rev>``
(answered "regular" for every file, so the content travels in the commit) and ``POST .../commit/<rev>``
(NDJSON: a header, then one base64 ``file`` entry per file and a ``deletedFile`` entry per file it removes),
``GET .../tree/<rev>`` (the files a revision holds: a repository starts with ``.gitattributes``, a branch with its
main's files), ``HEAD``/``GET /<repo>/resolve/<rev>/<file>`` (a file, or the Hub's ``EntryNotFound`` 404) and
``PUT .../settings`` for a private push. ``files[(repo, revision)]`` is each revision's content.
``fail`` makes an endpoint refuse the
token (401), report an existing repository (409), or drop the connection without answering.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote


@dataclass
class Recorded:
    created: list[dict[str, Any]] = field(default_factory=list)  # create-repo payloads
    branches: list[tuple[str, str]] = field(default_factory=list)
    settings: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # repo, PUT .../settings payload
    commits: list[dict[str, Any]] = field(default_factory=list)  # repo, revision, summary, files {path: bytes}, deleted
    requests: list[str] = field(default_factory=list)
    tokens: list[str | None] = field(default_factory=list)


class HubStandIn:
    """``with HubStandIn() as hub:`` … ``hub.url`` is the endpoint; ``hub.fail = {"create": 401}`` etc."""

    def __init__(self) -> None:
        self.recorded = Recorded()
        self.fail: dict[str, int | str] = {}  # endpoint name → HTTP status, or "drop"
        self.existing: set[str] = set()
        self.files: dict[tuple[str, str], dict[str, bytes]] = {}
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 — http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stand_in.recorded.requests.append(self.path)
                stand_in.recorded.tokens.append(self.headers.get("Authorization"))
                stand_in.handle(self, self.path.split("?")[0], body)

            def do_HEAD(self) -> None:  # noqa: N802 — a file's metadata, before its download
                stand_in.resolve(self, body=False)

            def do_GET(self) -> None:  # noqa: N802 — a revision's tree, a file's content
                stand_in.recorded.requests.append(self.path)
                parts = self.path.split("?")[0].strip("/").split("/")
                if len(parts) >= 5 and parts[2] == "resolve":
                    stand_in.resolve(self, body=True)
                elif parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "tree":
                    repo, revision = f"{parts[2]}/{parts[3]}", unquote(parts[5])
                    files = stand_in.revision(repo, revision)
                    stand_in._send(self, 200, [{"type": "file", "path": name, "size": len(data),
                                                "oid": hashlib.sha1(data).hexdigest()}
                                               for name, data in sorted(files.items())])
                else:
                    stand_in._send(self, 404, {"error": f"the stand-in does not serve GET {self.path}"})

            def do_PUT(self) -> None:  # noqa: N802 — a repository's settings (its visibility)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stand_in.recorded.requests.append(self.path)
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts[:2] == ["api", "models"] and parts[-1] == "settings":
                    stand_in.recorded.settings.append(("/".join(parts[2:-1]), json.loads(body)))
                    stand_in._send(self, 200, {})
                else:
                    stand_in._send(self, 404, {"error": f"the stand-in does not serve PUT {self.path}"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HubStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def resolve(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        """``/<repo>/resolve/<revision>/<file>``: a file's content (GET) or metadata (HEAD), or the Hub's 404 naming
        ``EntryNotFound``."""
        parts = unquote(handler.path.split("?")[0]).strip("/").split("/")
        repo, revision, name = f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:])
        data = self.revision(repo, revision).get(name)
        if data is None:
            payload = json.dumps({"error": "Entry not found"}).encode()
            handler.send_response(404)
            handler.send_header("X-Error-Code", "EntryNotFound")
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            if body:
                handler.wfile.write(payload)
            return
        handler.send_response(200)
        handler.send_header("X-Repo-Commit", hashlib.sha1(repo.encode() + revision.encode()).hexdigest())
        handler.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if body:
            handler.wfile.write(data)

    def revision(self, repo: str, revision: str) -> dict[str, bytes]:
        """The files of ``repo`` at ``revision``: a new repository's ``.gitattributes``, a new branch's main's."""
        if (repo, "main") not in self.files:
            self.files[(repo, "main")] = {".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"}
        return self.files.setdefault((repo, revision), dict(self.files[(repo, "main")]))

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _failed(self, handler: BaseHTTPRequestHandler, endpoint: str) -> bool:
        failure = self.fail.get(endpoint)
        if failure is None:
            return False
        if failure == "drop":  # read the request, then close the socket without a word
            handler.close_connection = True
            handler.connection.close()
            return True
        messages = {401: "Invalid credentials in Authorization header",
                    409: "You already created this model repo", 403: "You don't have the rights"}
        self._send(handler, int(failure), {"error": messages.get(int(failure), "refused")})
        return True

    def handle(self, handler: BaseHTTPRequestHandler, path: str, body: bytes) -> None:
        parts = path.strip("/").split("/")
        if path == "/api/repos/create":
            if self._failed(handler, "create"):
                return
            payload = json.loads(body)
            repo = f"{payload.get('organization')}/{payload['name']}"
            if repo in self.existing:  # the Hub's 409 names the existing repository's URL
                self._send(handler, 409, {"error": "You already created this model repo", "url": f"{self.url}/{repo}"})
                return
            self.existing.add(repo)
            self.recorded.created.append(payload)
            self._send(handler, 200, {"url": f"{self.url}/{repo}", "name": repo})
        elif path == "/api/validate-yaml":
            self._send(handler, 200, {"errors": [], "warnings": []})
        elif parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "branch":
            if self._failed(handler, "branch"):
                return
            self.recorded.branches.append((f"{parts[2]}/{parts[3]}", "/".join(parts[5:])))
            self.revision(f"{parts[2]}/{parts[3]}", unquote("/".join(parts[5:])))
            self._send(handler, 200, {})
        elif parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "preupload":
            if self._failed(handler, "preupload"):
                return
            files = json.loads(body)["files"]
            self._send(handler, 200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                                for f in files]})
        elif parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "commit":
            if self._failed(handler, "commit"):
                return
            lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
            header = next(item["value"] for item in lines if item["key"] == "header")
            files = {item["value"]["path"]: base64.b64decode(item["value"]["content"])
                     for item in lines if item["key"] == "file"}
            deleted = [item["value"]["path"] for item in lines if item["key"] == "deletedFile"]
            repo, revision = f"{parts[2]}/{parts[3]}", "/".join(parts[5:])
            oid = hashlib.sha1(body).hexdigest()
            self.recorded.commits.append({"repo": repo, "revision": revision, "summary": header["summary"],
                                          "files": files, "deleted": deleted})
            content = self.revision(repo, unquote(revision))
            for name in deleted:
                content.pop(name, None)
            content.update(files)
            self._send(handler, 200, {"commitUrl": f"{self.url}/{repo}/commit/{oid}", "commitOid": oid,
                                      "pullRequestUrl": None})
        else:
            self._send(handler, 404, {"error": f"the stand-in does not serve {path}"})
