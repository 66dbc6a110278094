"""A tiny Hugging Face Hub look-alike for testing the publisher offline.

It serves, on 127.0.0.1 and an ephemeral port, just the endpoints that huggingface_hub's HfApi calls made by
``response_templates.authoring.publish`` use (checked against huggingface_hub 2.4; paths are matched loosely so that
nearby versions work too):

    GET  /api/whoami-v2                                   -> {"name": ..., "type": "user"}
    GET  /api/models/{repo}[/revision/{rev}]              -> model info: id, sha, siblings, gated, private
    HEAD /{repo}/resolve/{rev}/{path}                     -> X-Repo-Commit, ETag, Content-Length (hf_hub_download)
    GET  /{repo}/resolve/{rev}/{path}                     -> the file bytes
    GET  /api/models/{repo}/discussions?p=N               -> paginated discussions / pull requests
    POST /api/models/{repo}/preupload/{rev}[?create_pr=1] -> upload mode "regular" (+ oid of the current file)
    POST /api/models/{repo}/commit/{rev}[?create_pr=1]    -> applies the NDJSON commit; with create_pr it makes a
                                                             refs/pr/N branch and a pull request, else moves {rev}

Every request is recorded in ``hub.requests`` (method, path, query, body, whether it carried a token), every
commit in ``hub.commits`` and pull requests are added to the repo's discussions, so tests can check exactly
what was written, and where. Errors use the Hub's ``X-Error-Code`` headers so huggingface_hub raises its usual
exceptions (RepoNotFound, GatedRepo, EntryNotFound, RevisionNotFound).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


def git_blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class FakeRepo:
    repo_id: str
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # sha -> full file tree
    refs: dict[str, str] = field(default_factory=dict)  # "main", "refs/pr/1" -> sha
    discussions: list[dict] = field(default_factory=list)
    gated: bool = False
    fail_status: int | None = None  # every request on this repo answers with this status (e.g. 429)


@dataclass
class Request:
    method: str
    path: str
    query: dict
    body: bytes
    authorized: bool
    headers: dict


class FakeHub:
    """State of the fake Hub plus the HTTP server in a background thread. Use as a context manager."""

    def __init__(self, tokens: dict[str, str] | None = None, discussions_page_size: int = 50):
        self.tokens = dict(tokens or {})  # token -> user name
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[Request] = []
        self.commits: list[dict] = []  # {"repo", "revision", "create_pr", "parent", "sha", "files", "header"}
        self.page_size = discussions_page_size
        self.lock = threading.Lock()
        self._counter = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # -- setup -------------------------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def _new_sha(self, seed: str) -> str:
        self._counter += 1
        return hashlib.sha1(f"{seed}:{self._counter}".encode()).hexdigest()

    def add_repo(self, repo_id: str, files: dict[str, str | bytes], *, gated: bool = False) -> FakeRepo:
        tree = {path: data.encode("utf-8") if isinstance(data, str) else data for path, data in files.items()}
        sha = self._new_sha(repo_id)
        repo = FakeRepo(repo_id, commits={sha: tree}, refs={"main": sha}, gated=gated)
        self.repos[repo_id] = repo
        return repo

    def add_discussion(self, repo_id: str, title: str, author: str, *, status: str = "open",
                       is_pull_request: bool = True) -> dict:
        repo = self.repos[repo_id]
        item = {
            "num": len(repo.discussions) + 1,
            "title": title,
            "status": status,
            "isPullRequest": is_pull_request,
            "createdAt": "2026-01-01T00:00:00.000Z",
            "author": {"name": author, "type": "user"},
            "repo": {"name": repo_id, "type": "model"},
            "pinned": False,
            "numComments": 1,
            "topReactions": [],
        }
        repo.discussions.append(item)
        return item

    # -- inspection helpers --------------------------------------------------------------------------------
    def file(self, repo_id: str, path: str, revision: str = "main") -> bytes | None:
        repo = self.repos[repo_id]
        sha = repo.refs.get(revision, revision)
        return repo.commits.get(sha, {}).get(path)

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method == "POST"]


def _make_handler(hub: FakeHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # keep test output clean
            pass

        # -- plumbing -------------------------------------------------------------------------------------
        def _user(self) -> str | None:
            auth = self.headers.get("Authorization", "")
            token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
            return hub.tokens.get(token) if token else None

        def _send(self, status: int, body: bytes = b"", headers: dict | None = None,
                  content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, data, headers: dict | None = None) -> None:
            self._send(status, json.dumps(data).encode(), headers)

        def _error(self, status: int, code: str | None, message: str, headers: dict | None = None) -> None:
            extra = dict(headers or {})
            if code:
                extra["X-Error-Code"] = code
            extra["X-Error-Message"] = message
            self._json(status, {"error": message}, extra)

        def _handle(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            path = url.path
            with hub.lock:
                hub.requests.append(Request(self.command, path, query, body,
                                            authorized=self._user() is not None,
                                            headers={k.lower(): v for k, v in self.headers.items()}))
                self._route(path, query, body)

        do_GET = do_HEAD = do_POST = _handle

        # -- routing ----------------------------------------------------------------------------------------
        def _route(self, path: str, query: dict, body: bytes) -> None:
            if path == "/api/whoami-v2":
                user = self._user()
                if user is None:
                    return self._error(401, None, "Invalid credentials in Authorization header")
                return self._json(200, {"type": "user", "name": user, "fullname": user, "orgs": []})

            m = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/(revision|discussions|preupload|commit)(?:/(.*))?)?",
                             path)
            if m:
                repo = self._repo(m.group(1))
                if repo is None:
                    return
                action, rest = m.group(2), unquote(m.group(3) or "")
                if action is None or action == "revision":
                    return self._model_info(repo, rest or "main")
                if action == "discussions" and self.command == "GET":
                    return self._discussions(repo, query)
                if action == "preupload" and self.command == "POST":
                    return self._preupload(repo, rest, body)
                if action == "commit" and self.command == "POST":
                    return self._commit(repo, rest, query, body)
                return self._error(404, None, f"no such endpoint: {self.command} {path}")

            m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
            if m and self.command in ("GET", "HEAD"):
                repo = self._repo(m.group(1))
                if repo is None:
                    return
                return self._resolve(repo, unquote(m.group(2)), unquote(m.group(3)))
            return self._error(404, None, f"no such endpoint: {self.command} {path}")

        def _repo(self, repo_id: str) -> FakeRepo | None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "RepoNotFound", "Repository not found")
                return None
            if repo.fail_status is not None:
                headers = {"Retry-After": "30"} if repo.fail_status == 429 else {}
                self._error(repo.fail_status, None, "Too many requests" if repo.fail_status == 429 else "error",
                            headers)
                return None
            return repo

        def _sha(self, repo: FakeRepo, revision: str) -> str | None:
            if revision in repo.refs:
                return repo.refs[revision]
            if revision in repo.commits:
                return revision
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return None

        # -- endpoints ----------------------------------------------------------------------------------------
        def _model_info(self, repo: FakeRepo, revision: str) -> None:
            sha = self._sha(repo, revision)
            if sha is None:
                return
            tree = repo.commits[sha]
            self._json(200, {
                "_id": hashlib.md5(repo.repo_id.encode()).hexdigest()[:24],
                "id": repo.repo_id,
                "modelId": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": sha,
                "private": False,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "tags": [],
                "siblings": [{"rfilename": name} for name in sorted(tree)],
                "lastModified": "2026-01-01T00:00:00.000Z",
                "createdAt": "2025-01-01T00:00:00.000Z",
            })

        def _resolve(self, repo: FakeRepo, revision: str, filename: str) -> None:
            if repo.gated:
                if self._user() is None:
                    return self._error(401, "GatedRepo", "Access to this model is restricted: log in")
                return self._error(403, "GatedRepo", "Access to this model is restricted: accept the conditions")
            sha = self._sha(repo, revision)
            if sha is None:
                return
            data = repo.commits[sha].get(filename)
            if data is None:
                return self._error(404, "EntryNotFound", f"{filename} does not exist", {"X-Repo-Commit": sha})
            self._send(200, data, {"X-Repo-Commit": sha, "ETag": f'"{git_blob_sha(data)}"',
                                   "Accept-Ranges": "bytes"}, content_type="application/octet-stream")

        def _discussions(self, repo: FakeRepo, query: dict) -> None:
            items = list(reversed(repo.discussions))  # newest first, like the Hub
            kind = query.get("type")
            if kind == "pull_request":
                items = [d for d in items if d["isPullRequest"]]
            elif kind == "discussion":
                items = [d for d in items if not d["isPullRequest"]]
            status = query.get("status")
            if status == "open":
                items = [d for d in items if d["status"] in ("open", "draft")]
            elif status == "closed":
                items = [d for d in items if d["status"] in ("closed", "merged")]
            if query.get("author"):
                items = [d for d in items if d["author"]["name"] == query["author"]]
            page = int(query.get("p", 0))
            start = page * hub.page_size
            self._json(200, {"discussions": items[start:start + hub.page_size], "count": len(items),
                             "start": start, "numClosedDiscussions": 0})

        def _require_write(self) -> str | None:
            user = self._user()
            if user is None:
                self._error(401, None, "Invalid credentials in Authorization header")
            return user

        def _preupload(self, repo: FakeRepo, revision: str, body: bytes) -> None:
            if self._require_write() is None:
                return
            sha = self._sha(repo, revision)
            if sha is None:
                return
            files = json.loads(body)["files"]
            tree = repo.commits[sha]
            self._json(200, {"files": [
                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                 "oid": git_blob_sha(tree[f["path"]]) if f["path"] in tree else None}
                for f in files
            ], "commitOid": sha})

        def _commit(self, repo: FakeRepo, revision: str, query: dict, body: bytes) -> None:
            user = self._require_write()
            if user is None:
                return
            head = self._sha(repo, revision)
            if head is None:
                return
            lines = [json.loads(line) for line in body.decode("utf-8").splitlines() if line.strip()]
            header = next((item["value"] for item in lines if item["key"] == "header"), {})
            create_pr = query.get("create_pr") in ("1", "true", "True")
            parent = header.get("parentCommit")
            if parent is not None:
                full = next((s for s in repo.commits if s.startswith(parent)), None)
                if full is None:
                    return self._error(404, "RevisionNotFound", f"Invalid parent commit: {parent}")
                if not create_pr and full != head:
                    return self._error(412, None, "A commit has happened since. Please refresh and try again.")
                base = full
            else:
                base = head
            tree = dict(repo.commits[base])
            written = {}
            for item in lines:
                if item["key"] == "file":
                    value = item["value"]
                    data = base64.b64decode(value["content"]) if value.get("encoding") == "base64" \
                        else value["content"].encode()
                    tree[value["path"]] = written[value["path"]] = data
                elif item["key"] == "deletedFile":
                    tree.pop(item["value"]["path"], None)
                    written[item["value"]["path"]] = None
                elif item["key"] != "header":
                    return self._error(400, None, f"unsupported commit operation {item['key']}")
            sha = hub._new_sha(repo.repo_id)
            repo.commits[sha] = tree
            record = {"repo": repo.repo_id, "revision": revision, "create_pr": create_pr, "parent": base,
                      "sha": sha, "files": written, "header": header, "user": user}
            result = {"commitUrl": f"{hub.endpoint}/{repo.repo_id}/commit/{sha}", "commitOid": sha,
                      "success": True}
            if create_pr:
                pr = hub.add_discussion(repo.repo_id, header.get("summary", ""), user)
                pr["description"] = header.get("description", "")
                repo.refs[f"refs/pr/{pr['num']}"] = sha
                record["pr_num"] = pr["num"]
                result["pullRequestUrl"] = f"{hub.endpoint}/{repo.repo_id}/discussions/{pr['num']}"
            else:
                repo.refs[revision] = sha
            hub.commits.append(record)
            self._json(200, result)

    return Handler
