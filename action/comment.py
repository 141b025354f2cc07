"""Keeps one comment on a pull request up to date with gpuprof's summary: created on the
first run, edited on later ones (found by a hidden marker), never one more per push.

    python3 comment.py SUMMARY_FILE

reads GITHUB_API_URL, GITHUB_REPOSITORY, GITHUB_TOKEN and PR_NUMBER, as a GitHub runner
sets them; the Python standard library only, so any python3 on the runner runs it.  Where
the token may not write to the pull request (a fork's pull request gets a read-only token:
the API answers 403), it says so and leaves the verdict to the job summary, without
failing the job.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

#: Marks the comment this program keeps; hidden where GitHub renders the Markdown.
MARKER = "<!-- pytest-gpuprof -->"
#: Who writes the comment with the job's own token (COMMENT_AUTHOR: another token's login).
BOT = "github-actions[bot]"
#: GitHub refuses a comment longer than this (characters).
MAX_BODY = 65536
CUT = "\n\n*(cut here: the rest is in the run's job summary)*\n"
PAGE = 100
READ_ONLY = ("the token may not comment on this pull request (HTTP 403: a pull request from a fork gets a "
             "read-only token, or the job lacks the permission pull-requests: write), so the verdict is in "
             "the run's job summary only")

#: (method, URL, JSON payload or None) -> (HTTP status, decoded JSON answer)
Http = Callable[[str, str, "dict[str, Any] | None"], "tuple[int, Any]"]


class ApiError(Exception):
    def __init__(self, status: int, what: str, answer: Any):
        message = answer.get("message") if isinstance(answer, dict) else answer
        super().__init__(f"{what}: HTTP {status} {message}")
        self.status = status


def urllib_http(token: str) -> Http:
    """The GitHub REST API over urllib, authenticated with ``token``."""
    headers = {"Accept": "application/vnd.github+json", "Authorization": f"Bearer {token}",
               "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "pytest-gpuprof-action"}

    def http(method: str, url: str, payload: dict[str, Any] | None) -> tuple[int, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={**headers, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            text = error.read().decode(errors="replace")
            try:
                return error.code, json.loads(text)
            except ValueError:
                return error.code, text

    return http


def marker(name: str = "") -> str:
    """The hidden line that marks the comment of the gate called ``name`` (input name: several
    gates of one workflow keep a comment each)."""
    return MARKER.replace(" -->", f":{name} -->") if name else MARKER


def comment_body(summary: str, name: str = "") -> str:
    """The marker, a blank line (so that the summary's heading is read as one), then the summary,
    cut to what GitHub accepts."""
    body = f"{marker(name)}\n\n{summary}"
    if len(body) > MAX_BODY:
        body = body[:MAX_BODY - len(CUT)] + CUT
    return body


def _call(http: Http, method: str, url: str, payload: dict[str, Any] | None, what: str) -> Any:
    status, answer = http(method, url, payload)
    if not 200 <= status < 300:
        raise ApiError(status, what, answer)
    return answer


def find_comment(http: Http, issue_url: str, author: str, name: str = "") -> int | None:
    """The id of the pull request's comment that holds the marker of the gate ``name`` and
    that ``author`` wrote, if any: a marker anyone else wrote (a planted "all passed") is not
    the gate's comment."""
    page = 1
    while True:
        comments = _call(http, "GET", f"{issue_url}/comments?per_page={PAGE}&page={page}", None,
                         "listing the pull request's comments")
        for comment in comments:
            if marker(name) in (comment.get("body") or "") and (comment.get("user") or {}).get("login") == author:
                return int(comment["id"])
        if len(comments) < PAGE:
            return None
        page += 1


def keep_comment(http: Http, api: str, repository: str, number: int, summary: str, author: str,
                 name: str = "") -> str:
    """Creates or edits the comment ``author`` keeps for the gate ``name``; says which, with its address."""
    repo_url = f"{api.rstrip('/')}/repos/{repository}"
    issue_url = f"{repo_url}/issues/{number}"
    body = {"body": comment_body(summary, name)}
    found = find_comment(http, issue_url, author, name)
    if found is None:
        answer = _call(http, "POST", f"{issue_url}/comments", body, "creating the comment")
        return f"commented on pull request #{number}: {answer.get('html_url', '')}"
    answer = _call(http, "PATCH", f"{repo_url}/issues/comments/{found}", body, "editing the comment")
    return f"updated the comment on pull request #{number}: {answer.get('html_url', '')}"


def main(argv: list[str], environ: dict[str, str], http: Http | None = None) -> int:
    if len(argv) != 1:
        print("usage: comment.py SUMMARY_FILE", file=sys.stderr)
        return 2
    missing = [name for name in ("GITHUB_REPOSITORY", "GITHUB_TOKEN", "PR_NUMBER") if not environ.get(name)]
    if missing:
        print(f"::error::comment.py: {', '.join(missing)} not set", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as file:
            summary = file.read()
    except OSError as error:
        print(f"::error::comment.py: cannot read the summary {argv[0]}: {error.strerror}")
        return 1
    http = http or urllib_http(environ["GITHUB_TOKEN"])
    try:
        print(keep_comment(http, environ.get("GITHUB_API_URL", "https://api.github.com"),
                           environ["GITHUB_REPOSITORY"], int(environ["PR_NUMBER"]), summary,
                           environ.get("COMMENT_AUTHOR") or BOT, environ.get("COMMENT_NAME", "")))
    except ApiError as error:
        if error.status == 403:
            print(f"::notice title=pytest-gpuprof::{READ_ONLY}")
            return 0
        print(f"::error title=pytest-gpuprof::{error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], dict(os.environ)))
