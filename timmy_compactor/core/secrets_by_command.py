"""Passwords given to a command by an option only that command reads as a password (a pass of `redact`).

`-p` is a port or a path to most tools, so it counts only after a tool that takes a password there:
`docker|podman|buildah|skopeo|nerdctl|oras|helm registry|az|oc|cf login … -p PASS`,
`mongo|mongosh … -p PASS`, `redis-cli … -a PASS`, `sqlcmd|bcp … -P PASS`,
`ldapsearch|ldapadd|ldapmodify|ldapdelete|ldappasswd|ldapwhoami … -w PASS`, `zip|unzip … -P PASS`,
`7z … -pPASS`; `smbclient -U user%PASS`, openssl's `-passin|-passout|-pass pass:PASS`,
`htpasswd -b[c] [file] user PASS`; `echo 'PASS' | sudo -S`, `echo 'user:PASS' | chpasswd`;
`sqlplus user/PASS@db`, `lftp -u user,PASS`, `rabbitmqctl add_user user PASS`.
The tool's name and the option stay readable, the value becomes a reference. Pure.
"""

from __future__ import annotations

import re

from timmy_compactor.core.credential_refs import credential_ref, stands_in

_GAP = r"(?:[^\n\\|;&]|\\[\"'])"  # the rest of the command line, JSON-escaped quotes included
_VALUE = r"(?:\\?[\"'])?(?P<secret>[^\s\"'\\-][^\s\"'\\]*)"


def _after(tools: str, option: str) -> re.Pattern[str]:
    """`tools … option VALUE`; the pattern begins with the tool's name (fast in `re`), `_value` checks
    that the name starts a word."""
    return re.compile(rf"(?P<key>(?:{tools})\b{_GAP}{{0,200}}?[ \t]{option}[ \t]*){_VALUE}")


_COMMANDS = (  # (word the command holds, option it holds, pattern): the pattern runs only when both are there
    (
        "login",
        " -p",
        _after(r"(?:docker|podman|buildah|skopeo|nerdctl|oras|helm[ \t]+registry|az|oc|cf)[ \t]+login", "-p"),
    ),
    ("mongo", " -p", _after("mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport", "-p")),
    ("redis-cli", " -a", _after("redis-cli", "-a")),
    ("sqlcmd", " -P", _after("sqlcmd|bcp", "-P")),
    ("ldap", " -w", _after("ldapsearch|ldapadd|ldapmodify|ldapdelete|ldappasswd|ldapwhoami", "-w")),
    ("zip", " -P", _after("zip|unzip|zipcloak", "-P")),
)
# `sqlplus user/PASS@db`, `lftp -u user,PASS`, `rabbitmqctl add_user|change_password user PASS`.
_USER_SLASH = re.compile(r"(?P<key>(?:sqlplus|rman|expdp|impdp)[ \t]+(?:-\w+[ \t]+)*[\w$#.-]+/)" + _VALUE)
_LFTP = re.compile(r"(?P<key>lftp\b" + _GAP + r"{0,100}?[ \t]-u[ \t]+[^\s,]+,)" + _VALUE)
_RABBIT = re.compile(
    r"(?P<key>rabbitmqctl[ \t]+(?:add_user|change_password)[ \t]+\S+[ \t]+(?:\\?[\"'])?)"
    r"(?P<secret>[^\s\"'\\]+)"
)
_SEVEN_ZIP = re.compile(r"(?P<key>7z[az]?\b" + _GAP + r"{0,200}?[ \t]-p)" + _VALUE)
# A password piped into a command that reads it: `echo 'PASS' | sudo -S`, `echo 'user:PASS' | chpasswd`.
_PIPED = re.compile(
    r"(?P<key>(?:echo|printf)[ \t]+(?:-[ne][ \t]+)?(?:\\?[\"'])?(?:(?P<user>[\w.-]+):)?)"
    r"(?P<secret>[^\s\"'\\|]+)(?=(?:\\?[\"'])?[ \t]*\|[ \t]*(?:sudo[ \t]+-\w*S|chpasswd|passwd[ \t]+--stdin))"
)
_SMB_USER = re.compile(r"(?P<key>(?<![\w-])(?:-U|--user(?:=|[ \t]+))[ \t]*(?:\\?[\"'])?[^\s%\"'\\]+%)" + _VALUE)
_OPENSSL_PASS = re.compile(r"(?P<key>(?<![\w-])-pass(?:in|out)?[ \t]+(?:\\?[\"'])?pass:)(?P<secret>[^\s\"'\\]+)")
# `htpasswd -b FILE USER PASS`, `-nb USER PASS` (no file): the password is the last argument.
_HTPASSWD_B = re.compile(
    r"(?P<key>htpasswd[ \t]+(?:-(?=[a-zA-Z]*n)(?=[a-zA-Z]*b)[a-zA-Z]+"
    r"|-(?![a-zA-Z]*n)(?=[a-zA-Z]*b)[a-zA-Z]+[ \t]+[^\s-]\S*)[ \t]+[^\s-]\S*[ \t]+)" + _VALUE
)


# Every gate below holds one of these in the lower-cased text: where none is, `redact_commands` changes
# nothing (`redact` skips it, with the other passes, where no word of any is).
GATE_WORDS = (
    *(word for word, _, _ in _COMMANDS), "-u", "pass:", "sqlplus", "rman", "expdp", "impdp", "lftp", "rabbitmqctl",
    "7z", "sudo", "passwd", "htpasswd",
)  # fmt: skip


def redact_commands(text: str, low: str) -> str:
    """Every password option above; `low` is `text.lower()` (the gates)."""
    if " -" in text:  # in every option of `_COMMANDS`
        for word, option, pattern in _COMMANDS:
            if word in low and option in text:
                text = pattern.sub(_value, text)
    if "%" in text and "-u" in low:
        text = _SMB_USER.sub(_value, text)
    if "pass:" in low:
        text = _OPENSSL_PASS.sub(_value, text)
    if "sqlplus" in low or "rman" in low or "expdp" in low or "impdp" in low:
        text = _USER_SLASH.sub(_value, text)
    if "lftp" in low:
        text = _LFTP.sub(_value, text)
    if "rabbitmqctl" in low:
        text = _RABBIT.sub(_value, text)
    if "7z" in low and " -p" in text:
        text = _SEVEN_ZIP.sub(_value, text)
    if "|" in text and ("sudo" in low or "passwd" in low) and ("echo" in low or "printf" in low):
        text = _PIPED.sub(_piped, text)
    if "htpasswd" in low:
        text = _HTPASSWD_B.sub(_value, text)
    return text


def _value(match: re.Match[str]) -> str:
    text, start = match.string, match.start()
    before = text[start - 1] if start else " "
    if (before.isalnum() or before in "_-") and not (start >= 2 and text[start - 2] == "\\" and before in "nrt"):
        return match.group(0)  # inside a longer word (`mydocker login`), not after a JSON escape (`\\ndocker`)
    secret = match.group("secret")
    if stands_in(secret) or secret.startswith(("$", "<", "%(")):
        return match.group(0)
    offset = match.start("secret") - start
    return match.group(0)[:offset] + credential_ref(secret) + match.group(0)[offset + len(secret) :]


def _piped(match: re.Match[str]) -> str:
    if match.group("user") is not None and stands_in(f"{match.group('user')}:{match.group('secret')}"):
        return match.group(0)  # `echo 'credential_ref:…'`: redacted already
    return _value(match)
