"""Passwords given to a command by an option only that command reads as a password (a pass of `redact`).

`-p` is a port or a path to most tools, so it counts only after a tool that takes a password there:
`docker|podman|buildah|skopeo|nerdctl|oras login … -p PASS`, `redis-cli … -a PASS`, `sqlcmd|bcp … -P
PASS`, `ldapsearch|ldapadd|ldapmodify|ldapdelete|ldappasswd|ldapwhoami … -w PASS`; and
`smbclient -U user%PASS`, openssl's `-passin|-passout|-pass pass:PASS`, `htpasswd -b[c] [file] user
PASS`. The tool's name and the option stay readable, the value becomes a reference. Pure.
"""

from __future__ import annotations

import re

from timmy_compactor.core.credential_refs import credential_ref, stands_in

_START = r"(?:(?<![\w-])|(?<=\\[nrt]))"
_GAP = r"(?:[^\n\\|;&]|\\[\"'])"  # the rest of the command line, JSON-escaped quotes included
_VALUE = r"(?:\\?[\"'])?(?P<secret>[^\s\"'\\-][^\s\"'\\]*)"


def _after(tools: str, option: str) -> re.Pattern[str]:
    return re.compile(rf"(?P<key>{_START}(?:{tools})\b{_GAP}{{0,200}}?[ \t]{option}[ \t]*){_VALUE}")


_COMMANDS = (
    ("login", _after(r"(?:docker|podman|buildah|skopeo|nerdctl|oras)[ \t]+login", "-p")),
    ("redis-cli", _after("redis-cli", "-a")),
    ("sqlcmd", _after("sqlcmd|bcp", "-P")),
    ("ldap", _after("ldapsearch|ldapadd|ldapmodify|ldapdelete|ldappasswd|ldapwhoami", "-w")),
)
_SMB_USER = re.compile(r"(?P<key>(?<![\w-])(?:-U|--user(?:=|[ \t]+))[ \t]*(?:\\?[\"'])?[^\s%\"'\\]+%)" + _VALUE)
_OPENSSL_PASS = re.compile(r"(?P<key>(?<![\w-])-pass(?:in|out)?[ \t]+(?:\\?[\"'])?pass:)(?P<secret>[^\s\"'\\]+)")
# `htpasswd -b FILE USER PASS`, `-nb USER PASS` (no file): the password is the last argument.
_HTPASSWD_B = re.compile(
    r"(?P<key>" + _START + r"htpasswd[ \t]+(?:-(?=[a-zA-Z]*n)(?=[a-zA-Z]*b)[a-zA-Z]+"
    r"|-(?![a-zA-Z]*n)(?=[a-zA-Z]*b)[a-zA-Z]+[ \t]+[^\s-]\S*)[ \t]+[^\s-]\S*[ \t]+)" + _VALUE
)


def redact_commands(text: str, low: str) -> str:
    """Every password option above; `low` is `text.lower()` (the gates)."""
    for word, pattern in _COMMANDS:
        if word in low:
            text = pattern.sub(_value, text)
    if "%" in text and "-u" in low:
        text = _SMB_USER.sub(_value, text)
    if "pass:" in low:
        text = _OPENSSL_PASS.sub(_value, text)
    if "htpasswd" in low:
        text = _HTPASSWD_B.sub(_value, text)
    return text


def _value(match: re.Match[str]) -> str:
    secret = match.group("secret")
    if stands_in(secret) or secret.startswith(("$", "<", "%(")):
        return match.group(0)
    start = match.start("secret") - match.start()
    return match.group(0)[:start] + credential_ref(secret) + match.group(0)[start + len(secret) :]
