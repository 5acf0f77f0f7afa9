"""The canonical call as an Apple Shortcut: a "Text" action holding the call's canonical JSON, then a
"Get Contents of URL" action POSTing it to the dispatch door.

The form is the shortcut's property list written as JSON (the keys Shortcuts itself uses:
`WFWorkflowActions`, `is.workflow.actions.downloadurl`, `WFHTTPHeaders`, ...); `plutil -convert
binary1` makes it a `.shortcut` file to sign and import. The body is sent as a file (the Text action's
output), not as a Shortcuts dictionary, so the bytes are the canonical JSON exactly, as every other
form sends them. A device reaches `flightlog.local` through the proxy set for its network.

A shortcut cannot read an environment variable: without a lent token it asks for one when it runs
("Ask for Input", prompt FLIGHTLOG_TOKEN), and the authorization header is `Bearer ` and that answer.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, Final

from catalog.forms.upstream import canonical_json

TEXT_ACTION: Final = "is.workflow.actions.gettext"
ASK_ACTION: Final = "is.workflow.actions.ask"
URL_ACTION: Final = "is.workflow.actions.downloadurl"
ATTACHMENT: Final = "\ufffc"
"""Where a variable stands inside a Shortcuts text (its `attachmentsByRange` says which)."""
TOKEN_PROMPT: Final = "FLIGHTLOG_TOKEN"


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "call"


def _id(name: str, role: str) -> str:
    """A stable action UUID, so the same call renders the same shortcut."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"flightlog:shortcut:{name}:{role}")).upper()


def _output(action_id: str, output: str) -> dict[str, Any]:
    return {"OutputUUID": action_id, "Type": "ActionOutput", "OutputName": output}


def _text(string: str, attachments: Mapping[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Shortcuts text token string: plain text, each variable at its offset."""
    ranges = {f"{{{at}, 1}}": source for at, source in (attachments or {}).items()}
    value: dict[str, Any] = {"string": string} | ({"attachmentsByRange": ranges} if ranges else {})
    return {"Value": value, "WFSerializationType": "WFTextTokenString"}


def shortcut(
    name: str, door: str, headers: Mapping[str, str], call: Mapping[str, Any], token: str | None
) -> dict:
    """The shortcut's property list: Text (the call), [Ask for the token,] Get Contents of URL."""
    text_id, ask_id, url_id = _id(name, "text"), _id(name, "ask"), _id(name, "url")
    actions: list[dict[str, Any]] = [
        {
            "WFWorkflowActionIdentifier": TEXT_ACTION,
            "WFWorkflowActionParameters": {"UUID": text_id, "WFTextActionText": canonical_json(dict(call))},
        }
    ]
    items = []
    for key, value in headers.items():
        if key.lower() == "authorization" and not token:
            actions.append(
                {
                    "WFWorkflowActionIdentifier": ASK_ACTION,
                    "WFWorkflowActionParameters": {"UUID": ask_id, "WFAskActionPrompt": TOKEN_PROMPT},
                }
            )
            shown = _text("Bearer " + ATTACHMENT, {len("Bearer "): _output(ask_id, "Provided Input")})
        else:
            shown = _text(value)
        items.append({"WFItemType": 0, "WFKey": _text(key), "WFValue": shown})
    parameters = {
        "UUID": url_id,
        "WFURL": door,
        "WFHTTPMethod": "POST",
        "ShowHeaders": True,
        "WFHTTPHeaders": {
            "Value": {"WFDictionaryFieldValueItems": items},
            "WFSerializationType": "WFDictionaryFieldValue",
        },
        "WFHTTPBodyType": "File",
        "WFRequestVariable": {
            "Value": _output(text_id, "Text"),
            "WFSerializationType": "WFTextTokenAttachment",
        },
    }
    actions.append({"WFWorkflowActionIdentifier": URL_ACTION, "WFWorkflowActionParameters": parameters})
    return {
        "WFWorkflowName": f"Run {name}",
        "WFWorkflowClientVersion": "2302.0.4",
        "WFWorkflowMinimumClientVersion": 900,
        "WFWorkflowTypes": [],
        "WFWorkflowInputContentItemClasses": [],
        "WFWorkflowActions": actions,
    }


def shortcut_form(
    name: str, door: str, headers: Mapping[str, str], call: Mapping[str, Any], token: str | None
) -> dict[str, Any]:
    """The `apple_shortcut` form: the shortcut as JSON, with the file name to save it under."""
    content = shortcut(name, door, headers, call, token)
    return {
        "method": "CODE",
        "language": "json",
        "code": json.dumps(content, indent=2),
        "paths": [f"{_file_name(name)}.shortcut.json"],
    }
