"""Reading the egress policy file: every key checked, every mistake one line naming where it is."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from egress.errors import PolicyFileError
from egress.policy_file import load_policy_file, parse_policy
from egress.rules import Call

FULL = """
default = "deny"
ask_timeout = "90s"
retired_hosts = false

[[rule]]
name = "no-shell"
action = "deny"
tools = ["shell_*"]
args = { cmd = ["rm *", "curl *"], "opts.mode" = "force" }

[[rule]]
action = "allow"
hosts = ["api.anthropic.com", ".github.com", "10.0.0.0/8", "[::1]:8443"]
methods = ["get", "POST"]
paths = ["/v1/*"]
agents = "alpha"
sessions = ["s-*"]
tasks = ["t1"]

[[rule]]
action = "ask"
hosts = "*"

[[budget]]
name = "alpha-daily"
per = "session"
period = "all"
tokens = 1000
cost_usd = 2
agents = ["alpha"]

[[rate]]
name = "slow"
requests = 5
window = "2m"
per = "task"
hosts = ["api.openai.com"]
"""


def test_a_full_policy_reads_every_key(tmp_path: Path) -> None:
    """Every documented key is read into the policy: rules in file order with their names (given
    or rule-N), the default, the ask timeout, budgets and rates with their figures."""
    path = tmp_path / "egress.toml"
    path.write_text(FULL)
    policy = load_policy_file(path, tmp_path)
    assert [r.name for r in policy.rules] == ["no-shell", "rule-2", "rule-3"]
    assert [r.action for r in policy.rules] == ["deny", "allow", "ask"]
    assert policy.default == "deny" and policy.ask_timeout == 90.0 and policy.retired is None
    (budget,) = policy.budgets
    assert (budget.name, budget.per, budget.period, budget.tokens, budget.cost_usd) == (
        "alpha-daily", "session", "all", 1000, 2.0,
    )  # fmt: skip
    (rate,) = policy.rates
    assert (rate.name, rate.requests, rate.window, rate.per) == ("slow", 5, timedelta(minutes=2), "task")
    allow = policy.rules[1].scope
    assert allow.methods == frozenset({"GET", "POST"})
    assert "hosts=api.anthropic.com,.github.com,10.0.0.0/8,[::1]:8443" in allow.text
    call = Call("http", "api.github.com", 443, "GET", "/v1/x", "alpha", "s-9", "t1")
    assert policy.judge(call).rule == "rule-2"


def test_a_missing_file_is_no_policy(tmp_path: Path) -> None:
    """No file: an empty policy that allows everything without looking (the proxy as before)."""
    policy = load_policy_file(tmp_path / "absent.toml", tmp_path)
    assert policy.empty
    assert policy.judge(Call("http", "anything.example", 443, "GET", "/")).action == "allow"


BAD = [
    ('default = "maybe"', 'default is "allow" or "deny"'),
    ("colour = 1", "unknown key 'colour'"),
    ('ask_timeout = "soon"', "ask_timeout is a duration"),
    ("retired_hosts = 1", "retired_hosts is true or false"),
    ("rule = 3", "rule is a list of tables"),
    ('[[rule]]\naction = "permit"', "rule 1: action is one of allow, deny, ask"),
    ('[[rule]]\naction = "deny"\nhostz = ["a"]', "rule 1: unknown key 'hostz'"),
    ('[[rule]]\naction = "deny"\nhosts = []', "hosts is a string or a non-empty list"),
    ('[[rule]]\naction = "deny"\nhosts = ["exa mple.com"]', "is not a host pattern"),
    ('[[rule]]\naction = "deny"\nhosts = ["a.example:99999"]', "no port between 1 and 65535"),
    ('[[rule]]\naction = "deny"\nhosts = ["10.0.0.0/33"]', "is not a network"),
    ('[[rule]]\naction = "deny"\nmethods = ["GET /"]', "is not an HTTP method"),
    ('[[rule]]\naction = "deny"\nhosts = ["*.10.0.0.1"]', "an address has no subdomains"),
    ('[[rule]]\naction = "deny"\nhosts = ["999.0.0.1"]', "numeric but"),
    ('[[rule]]\naction = "deny"\nprotocol = "ftp"', "protocol is one of http, tcp, udp, dns, quic, stdio"),
    ('[[rule]]\naction = "deny"\nport = 0', "port 0 is not a port"),
    ('[[rule]]\naction = "deny"\nport = "90-80"', "ends before it starts"),
    ('[[rule]]\naction = "deny"\nport = []', "port is a port, a range"),
    ('[[rule]]\naction = "deny"\nprotocol = "tcp"\npaths = ["/x"]', "add http to protocol"),
    ('[[rule]]\naction = "deny"\nprotocol = "dns"\ntools = ["x"]', "tools and args name MCP calls"),
    ('[[rule]]\naction = "deny"\nname = "a:b"', "name is 1-64 letters"),
    ('[[rule]]\naction = "deny"\nname = "x"\n[[rule]]\naction = "allow"\nname = "x"', "'x' is used twice"),
    ('[[rule]]\naction = "deny"\nargs = { path = 3 }', "args.path is a glob"),
    ('[[budget]]\nname = "b"', "needs tokens, cost_usd or both"),
    ("[[budget]]\ntokens = -1", "tokens is a whole number"),
    ('[[budget]]\ntokens = 5\nper = "team"', "per is one of agent, session, task"),
    ('[[budget]]\ntokens = 5\nperiod = "week"', "period is one of day, all"),
    ("[[rate]]\nrequests = 0", "requests is a whole number of 1 or more"),
    ('[[rate]]\nrequests = 1\nwindow = "0s"', "window is longer than 0 s"),
    ("[[rule]\n", "not TOML"),
]


@pytest.mark.parametrize(("text", "said"), BAD, ids=[b[1][:30] for b in BAD])
def test_every_mistake_is_one_line_naming_where(tmp_path: Path, text: str, said: str) -> None:
    """A malformed policy is refused with one line naming the file, the table and the key: a typo
    never silently loosens (or tightens) what is allowed."""
    path = tmp_path / "egress.toml"
    path.write_text(text)
    with pytest.raises(PolicyFileError) as caught:
        load_policy_file(path, tmp_path)
    message = str(caught.value)
    assert said in message and str(path) in message and "\n" not in message


def test_retired_hosts_come_from_the_home_unless_switched_off(tmp_path: Path) -> None:
    """The retired-hosts list of FLIGHTLOG_HOME joins the policy (first of all rules); a policy
    that says `retired_hosts = false` leaves it out."""
    (tmp_path / "refused_hosts.txt").write_text("old.example  # the previous build\n")
    call = Call("http", "api.old.example", 443, "GET", "/")
    assert parse_policy({}, "x", tmp_path).judge(call).rule == "retired-hosts"
    assert parse_policy({"retired_hosts": False}, "x", tmp_path).judge(call).action == "allow"


def test_the_readme_example_is_a_policy(tmp_path: Path) -> None:
    """The egress.toml the README shows reads as a policy (the README's own TOML check only parses it)."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = [b for b in re.findall(r"```toml\n(.*?)```", readme, re.S) if "[[rule]]" in b]
    assert len(blocks) == 1
    path = tmp_path / "egress.toml"
    path.write_text(blocks[0])
    policy = load_policy_file(path, tmp_path)
    names = ["no-shell-tools", "model-apis", "git-over-ssh", "review-payments"]
    assert [r.name for r in policy.rules] == names
    assert policy.default == "deny" and len(policy.budgets) == 1 and len(policy.rates) == 1
    assert policy.judge(Call("tcp", "GitHub.com", 22)).rule == "git-over-ssh"
    assert policy.judge(Call("tcp", "github.com", 23)).rule == "default"
