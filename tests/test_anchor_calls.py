"""How `fold.anchors` reads a call's command: the first of its `command` and `cmd` arguments that is a
string, as a scan of its arguments in order finds it."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from tests.test_properties import examples
from timmy_compactor.core.fold.anchors import command_of

_VALUES = st.one_of(st.text(max_size=5), st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2))


@examples(2_000)
@given(st.dictionaries(st.sampled_from(("command", "cmd", "path", "workdir", "Command")), _VALUES))
@example({"cmd": "ls", "command": "pwd"})  # both strings: the first written
@example({"command": 3, "cmd": "ls"})
@example({"cmd": ["ls"], "command": "pwd"})
def test_a_command_is_the_first_command_or_cmd_argument_that_is_a_string(args: dict[str, object]) -> None:
    scanned = next((v for k, v in args.items() if k in ("command", "cmd") and isinstance(v, str)), "")
    assert command_of(args) == scanned
