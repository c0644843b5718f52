"""The files and folders of a run: which a tool call named, and whether it wrote to them (spec §2a).

A path is a file or folder a tool call names as one: the `path` of a file tool (`read_file`,
`write_file`, `patch`…), or a word of a shell command in a place a file goes -- an operand of `cat`,
`ls`, `grep` (after its pattern), `sed`/`awk` (after their script), `find` (its start points), `cp`,
`cd`…, a redirection's target. Never a word of a `sed`/`awk`/`perl`/`python -c` script, of a heredoc
body (a file's content), of `echo`, of a diff's `a/`/`b/` prefix, nor a placeholder (`/path/to/file`,
`<dir>/x`, `$HOME/x`, globs) or `/dev/null`. A path without a slash counts only when the run wrote it
(`cat > fix.py <<EOF`) or a file tool named it. A tool output adds the file Hermes saved it to
(`<persisted-output>`) and the files `patch` reports it patched (`patching file x`).

**Edited** is a write: a write or patch tool, `sed -i`, `perl -i`, a `>`/`>>` redirection or `tee`, a
heredoc written into a file, `cp`/`mv` targets (and `mv` sources), `rm`, `touch`, `mkdir`, `git checkout
-- f`, the files of a diff fed to `patch`/`git apply`, and `open('f', 'w')` with a literal name in code
the run wrote. Everything else is a read.

Each spelling is normalised (`./a/x` is `a/x`, a trailing slash goes). `Spellings` merges a short spelling
into the one longer known path it is the end of (`sql/query.py` into `django/db/models/sql/query.py`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from timmy_compactor.core.facts import URL_RE, call_name, decoded_arguments, persisted_output_paths
from timmy_compactor.core.fold.shell import Command, commands, split_heredocs
from timmy_compactor.core.text import text_of

_NAME = re.compile(r"[\w.@+~-]+")
_PATH = re.compile(r"[\w.@+~/-]+")  # names between slashes
_EXTENSION = re.compile(r"\.[A-Za-z0-9_]{1,12}$")
_PLACEHOLDER_PARTS = frozenset({"path/to", "your", "yourname", "username", "xxx", "foo/bar", "some/path", "to/your"})
_PLACEHOLDER = re.compile("|".join(map(re.escape, sorted(_PLACEHOLDER_PARTS))))
_ASCII_LETTER = re.compile("[A-Za-z]")
_PATTERN_CHARS = re.compile(r"[*?\[\]{}$<>`]")  # a glob, a variable, a redirection: no file's own name
_NOT_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty", "-"})
_DIFF_TARGET = re.compile(r"^(?:\+\+\+|\*\*\* (?:Update|Add|Delete) File:)[ \t]+(\S+)", re.M)
_PATCHED = re.compile(r"^patching file '?([^'\n]+?)'?$", re.M)
_OPEN_WRITE = re.compile(r"""o(?<!\w.)pen\(\s*(['"])([^'"\n]+)\1\s*,\s*(?:mode\s*=\s*)?['"][wax]""")
_FILE_KEYS = frozenset(
    {"path", "file_path", "filepath", "filename", "file", "target_file", "source", "destination", "dest", "dir"}
)
_WRITING_TOOLS = ("write", "patch", "edit", "create", "replace", "insert", "append", "delete", "move")
_COMMAND_KEYS = frozenset({"command", "cmd"})
_CODE_KEYS = frozenset({"content", "old_string", "new_string", "patch", "code", "script"})

# Options that take a value (the next word), per command: the value is never a path operand.
_VALUE_OPTIONS = {
    "grep": frozenset(
        [
            "-e",
            "-f",
            "-m",
            "-A",
            "-B",
            "-C",
            "-d",
            "-D",
            "--include",
            "--exclude",
            "--exclude-dir",
            "--color",
            "--max-count",
        ]
    ),
    "sed": frozenset(["-e", "-f", "-l"]),
    "awk": frozenset(["-F", "-v", "-f"]),
    "head": frozenset(["-n", "-c"]),
    "tail": frozenset(["-n", "-c"]),
    "python": frozenset(["-c", "-m", "-W", "-X"]),
    "patch": frozenset(["-p", "-i", "-o", "-d", "-r", "-B", "-F", "-z"]),
    "git": frozenset(["-C", "-c", "-m", "-n", "-U", "--format"]),
}
_NO_OPTIONS: frozenset[str] = frozenset()
_SCRIPTED = frozenset({"sed", "awk", "gawk", "mawk", "perl", "ruby", "jq"})
_WRITES_OPERANDS = frozenset({"rm", "touch", "mkdir", "tee", "truncate", "rmdir", "unlink"})
_NO_PATHS = frozenset({"echo", "printf", "export", "true", "false", "exit", "kill", "sleep", "test", "["})
_WRAPPERS = frozenset({"sudo", "env", "nohup", "time", "timeout", "exec", "command", "xargs", "nice", "stdbuf"})


@dataclass(frozen=True, slots=True)
class Mention:
    path: str
    edited: bool


def normalised(path: str) -> str:
    """`./a/b` is `a/b` (`./x` stays: a slash is what makes a word a path), `a/b/` is `a/b`."""
    while path.startswith("./") and "/" in path[2:]:
        path = path[2:]
    return path.rstrip("/") if len(path) > 1 else path


def plausible(path: str, *, bare: bool = False) -> bool:
    """A name a file could have: name characters between slashes, a letter, no placeholder; a slash
    unless `bare` (a file the run wrote or a file tool named)."""
    if not path or path in _NOT_FILES or len(path) > 300 or path.startswith("-"):
        return False
    if "/" not in path:
        return bare and bool(_NAME.fullmatch(path)) and _has_letter(path) and path not in (".", "..")
    if not _PATH.fullmatch(path) or not _has_letter(path):
        return False  # every part a name (`.`, `..`, `~` too); the letter makes one more than those
    low = path.lower()
    return _PLACEHOLDER.search(low) is None and not low.startswith("/dev/")


def _has_letter(text: str) -> bool:
    return _ASCII_LETTER.search(text) is not None if text.isascii() else any(c.isalpha() for c in text)


def _strongly_a_path(word: str) -> bool:
    """A word of an unknown command that can be nothing but a path."""
    return word.startswith(("/", "./", "../", "~/")) or ("/" in word and bool(_EXTENSION.search(word)))


def message_mentions(message: dict[str, object]) -> list[tuple[Mention, str]]:
    """The paths and URLs a raw message names, in order (repeats kept: each is a ref), each with the
    text it was read from (where redaction looks at its surroundings)."""
    role = message.get("role")
    if role == "tool":
        content = message.get("content")
        text = text_of(content)
        found = [(Mention(p, False), text) for p in persisted_output_paths(content) if not URL_RE.match(p)]
        if "patching file" in text:
            patched = (normalised(p) for p in _PATCHED.findall(text))
            found += [(Mention(p, True), text) for p in patched if plausible(p)]
        return found
    if role != "assistant":
        return []
    out: list[tuple[Mention, str]] = []
    for call in message.get("tool_calls") or ():  # type: ignore[attr-defined]
        if isinstance(call, dict):
            out += call_mentions(call)
    return out


def call_arguments_of(call: dict[str, Any]) -> tuple[str, dict[str, object]]:
    """A call's tool name (lower-cased) and decoded arguments ({} when they are no JSON object)."""
    args = decoded_arguments(call)
    return call_name(call).lower(), args if isinstance(args, dict) else {}


def call_mentions(
    call: dict[str, object], read: tuple[str, dict[str, object]] | None = None
) -> list[tuple[Mention, str]]:
    """The paths and URLs a call names; `read`: its `call_arguments_of` when the caller has them."""
    name, args = read if read is not None else call_arguments_of(call)
    out: list[tuple[Mention, str]] = []
    for key, raw in args.items():
        value = " ".join(v for v in raw if isinstance(v, str)) if isinstance(raw, list) else raw
        if not isinstance(value, str):
            continue
        if key in _COMMAND_KEYS:
            out += [(m, value) for m in shell_mentions(value)]
        elif key in _FILE_KEYS:
            path = normalised(value.strip())
            if plausible(path, bare=True):
                out.append((Mention(path, _writes(name, args)), value))
        elif key == "patch":
            out += [(Mention(normalised(p), True), value) for p in _diff_targets(value)]
        if "://" not in value or key in _CODE_KEYS:
            continue
        urls = split_heredocs(value)[0] if key in _COMMAND_KEYS else value  # never "://" where `value` has none
        if "://" in urls:
            out += [(Mention(url, False), value) for url in URL_RE.findall(urls)]
    return out


def _writes(name: str, args: dict[str, object]) -> bool:
    """Whether a file tool's call writes the file it names."""
    return any(verb in name for verb in _WRITING_TOOLS) or args.get("mode") in ("replace", "write", "append")


def _diff_targets(text: str) -> Iterator[str]:
    for target in _DIFF_TARGET.findall(text):
        path = target[2:] if target.startswith(("a/", "b/")) else target
        if plausible(normalised(path)):
            yield path


def shell_mentions(text: str) -> list[Mention]:
    out: list[Mention] = []
    for command in commands(text):
        out += _named_by(command)
    return out


@functools.lru_cache(maxsize=512)  # commands recur in a run (`cd /testbed` in half its calls)
def _named_by(command: Command) -> tuple[Mention, ...]:
    named = ((normalised(path), edited) for path, edited in _command_mentions(command))
    return tuple(Mention(path, edited) for path, edited in named if plausible(path, bare=edited))


def _command_mentions(command: Command) -> list[tuple[str, bool]]:
    """Each word of `command` that names a file, and whether the command writes it."""
    words = _unwrapped(command.words)
    name = words[0].rsplit("/", 1)[-1] if words else ""
    found = [(w, False) for w in command.reads] if command.reads else []  # most commands redirect nothing
    if command.writes:
        found += [(w, True) for w in command.writes]
    if name.startswith("python"):
        name = "python"
    operands = _operands(name, words[1:])
    if name in ("sed", "perl"):
        in_place = any(_is_in_place(w, name) for w in words[1:] if w.startswith("-"))
        found += [(w, in_place) for w in operands]
    elif name in ("cp", "mv", "install", "ln"):
        found += [(w, name == "mv") for w in operands[:-1]] + [(w, True) for w in operands[-1:]]
    elif name in _WRITES_OPERANDS:
        found += [(w, True) for w in operands]
    elif name == "git":
        found += _git_mentions(operands)
    elif name == "patch":
        found += [(w, True) for w in operands[:1]] + [(w, False) for w in operands[1:]]
    elif name not in _NO_PATHS and name:
        known = name in _VALUE_OPTIONS or name in ("cat", "ls", "cd", "nl", "less", "more", "wc", "diff", "find")
        found += [(w, False) for w in operands if known or _strongly_a_path(w)]
    if command.bodies:
        found += _body_mentions(command, name)
    if name == "python" and (code := _option_value(words[1:], "-c")):
        found += [(m.group(2), True) for m in _OPEN_WRITE.finditer(code)]
    return found


def _body_mentions(command: Command, name: str) -> list[tuple[str, bool]]:
    """The files a command's heredocs name: the targets of a diff fed to `patch` or `git`, and the files a
    script the run wrote or ran opens to write."""
    found = [(p, True) for body in command.bodies for p in _diff_targets(body)] if name in ("patch", "git") else []
    if name != "cat" or not command.writes:
        found += [(m.group(2), True) for body in command.bodies for m in _OPEN_WRITE.finditer(body)]
    return found


def _unwrapped(words: tuple[str, ...]) -> tuple[str, ...]:
    """The words without leading `KEY=value` assignments and wrappers (`sudo`, `timeout 10`, `env`)."""
    k = 0
    while k < len(words):
        text = words[k]
        if "=" in text and not text.startswith("-") and re.match(r"[A-Za-z_]\w*=", text):
            k += 1
        elif text in _WRAPPERS:
            k += 1
            while k < len(words) and (words[k].startswith("-") or words[k].replace(".", "").isdigit()):
                k += 1
        else:
            break
    return words[k:]


def _operands(name: str, words: tuple[str, ...]) -> list[str]:
    """The words that name files: not options, their values, a script or a pattern, or a find expression."""
    takes_value = _VALUE_OPTIONS.get(name, _NO_OPTIONS)
    skip_first = (name in _SCRIPTED or name in ("grep", "egrep", "fgrep", "rg", "ag")) and not any(
        w in ("-e", "-f", "-E") or w.startswith("--expression") for w in words
    )  # the first operand is a script or a pattern unless an option gave it
    out: list[str] = []
    k = 0
    while k < len(words):
        text = words[k]
        k += 1
        if name == "find" and (text.startswith(("-", "(", "!")) or text == "\\("):
            break  # the expression: names and patterns, not files
        if text.startswith("-") and len(text) > 1:
            if text in takes_value or (name == "perl" and text in ("-e", "-E")):
                k += 1
            continue
        if skip_first:
            skip_first = False
            continue
        if text == "--" or _PATTERN_CHARS.search(text) or ("://" in text and URL_RE.match(text)):
            continue
        out.append(text)
    return out


def _is_in_place(option: str, name: str) -> bool:
    if option.startswith("--in-place"):
        return True
    return not option.startswith("--") and "i" in option[1:] and (name == "perl" or option[1] == "i")


def _option_value(words: tuple[str, ...], option: str) -> str:
    return words[words.index(option) + 1] if option in words and words.index(option) + 1 < len(words) else ""


def _git_mentions(operands: list[str]) -> list[tuple[str, bool]]:
    if not operands:
        return []
    sub, rest = operands[0], operands[1:]
    edits = sub in ("checkout", "restore", "rm", "mv")
    return [(w, edits) for w in rest if edits or sub == "apply" or _strongly_a_path(w)]


class Spellings:
    """Known spellings of the paths of a session so far, each short one merged into the one longer path
    it ends (`sql/query.py` → `django/db/models/sql/query.py`; two candidates: it stays itself)."""

    __slots__ = ("by_name",)

    def __init__(self) -> None:
        self.by_name: dict[str, set[str]] = {}

    def copy(self) -> Spellings:
        other = Spellings()
        other.by_name = {name: set(paths) for name, paths in self.by_name.items()}
        return other

    def add(self, paths: Iterable[str]) -> None:
        for path in paths:
            self.by_name.setdefault(path.rsplit("/", 1)[-1], set()).add(path)

    def full(self, path: str) -> str:
        """The longest known spelling `path` is the end of (itself when none, or when two are)."""
        known = self.by_name.get(path[path.rfind("/") + 1 :])
        if not known:
            return path
        end = "/" + path
        if len(known) == 1:  # most names: one spelling (`path` itself, or the one it ends)
            for only in known:
                return only if only.endswith(end) else path
        longer = [p for p in known if p.endswith(end)]
        if not longer:
            return path
        longest = max(longer, key=len)
        return longest if all(longest.endswith("/" + p) or p == longest for p in longer) else path


def plain_words(text: str) -> list[str]:
    """The words of a shell command that are neither code nor a script: `KEY=value` assignments before a
    command, its options and operands -- not a `sed`/`awk`/`perl` script, a `python -c` or `-e` program,
    a heredoc body, nor the arguments of a `KEY=value`-taking code call."""
    out: list[str] = []
    for command in commands(text):
        out += _plain(command.words)
    return out


@functools.lru_cache(maxsize=512)
def _plain(words: tuple[str, ...]) -> tuple[str, ...]:
    name = words[0].rsplit("/", 1)[-1] if words else ""
    out: list[str] = []
    k = 0
    script_pending = name in _SCRIPTED and not any(w in ("-e", "-E", "-f") for w in words)
    while k < len(words):
        word = words[k]
        k += 1
        if word in ("-c", "-e", "-E") and k > 1:
            k += 1  # its value is a program
            continue
        if script_pending and k > 1 and not word.startswith("-"):
            script_pending = False
            continue
        out.append(word)
    return tuple(out)
