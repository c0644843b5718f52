"""Credential redaction: stable references, no raw secret ever survives, digests and paths kept."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from timmy_compactor.core.redact import IP_MARKER, credential_ref, redact_text

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
secret_body = st.text(alphabet=ALNUM, min_size=20, max_size=48)


@settings(max_examples=300)
@given(
    body=secret_body,
    form=st.sampled_from(
        [
            "api_key={s}",
            "token: {s}",
            "Authorization: Bearer {s}",
            "sk-{s}",
            'password="{s}"',
            "export OPENAI_API_KEY={s}",
            "ghp_{s}",
        ]
    ),
    prefix=st.text(alphabet=ALNUM + " \n:", max_size=30),
    suffix=st.text(alphabet=ALNUM + " \n.", max_size=30),
)
def test_no_raw_secret_survives(body: str, form: str, prefix: str, suffix: str) -> None:
    assume(body not in prefix and body not in suffix)  # the secret may only appear as the secret
    secret_text = form.format(s=body)
    text = f"{prefix} {secret_text} {suffix}"
    out = redact_text(text)
    assert body not in out
    assert "credential_ref:" in out
    assert redact_text(text) == out  # deterministic
    assert redact_text(out) == out  # idempotent: refs are not redacted again


def test_same_secret_same_ref_and_readable_keys() -> None:
    out = redact_text("api_key=abc123def456ghi and later api_key=abc123def456ghi")
    ref = credential_ref("abc123def456ghi")
    assert out == f"api_key={ref} and later api_key={ref}"


def test_ipv4_masked_but_versions_and_dates_kept() -> None:
    out = redact_text("connect 192.168.1.20:22; python 3.11.7; 1.2.3.4.5; 300.1.1.1")
    assert out == f"connect {IP_MARKER}:22; python 3.11.7; 1.2.3.4.5; 300.1.1.1"


def test_digests_paths_and_words_are_not_secrets() -> None:
    text = (
        "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 at /home/dev/Some_Long_Directory_Name_2024_Backup_Files/x "
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 test_some_really_long_function_name_1"
    )
    assert redact_text(text) == text


def test_redact_value_walks_any_depth_without_recursion() -> None:
    """Issue 21: no RecursionError anywhere — a value nested far past the recursion limit is redacted
    (every string, at every depth), keys and order kept, the input untouched."""
    from timmy_compactor.core.redact import redact_value

    secret = "api_key=" + "k9" * 12
    deep: list[object] = []
    node = deep
    for k in range(50_000):
        child: list[object] = [f"level {k}"]
        node.append({"k": child, "note": secret if k % 10_000 == 0 else "plain"})
        node = child
    out = redact_value(deep)
    seen, walk = 0, out
    while walk:
        entry = walk[-1] if isinstance(walk[-1], dict) else None
        if entry is None:
            break
        assert list(entry) == ["k", "note"]
        assert "k9k9" not in entry["note"]
        seen += 1
        walk = entry["k"]
    assert seen == 50_000
    assert deep[0]["note"] == secret  # type: ignore[index]
    assert redact_value({"a": [1, None, True, "10.0.0.1"]}) == {"a": [1, None, True, IP_MARKER]}


def test_ldap_sha_and_ssha_hashes_are_redacted() -> None:
    """An LDAP `userPassword` hash: `{SHA}` is base64 of a SHA-1 (28 characters), `{SSHA}` of a SHA-1 and
    its salt; the scheme stays readable, the hash becomes a reference (as crypt(3)'s `$apr1$…` does)."""
    sha = "W6ph5Mm5Pz8GgiULbPgzG37mj9g="  # fake, the shape of base64(sha1(...))
    ssha = "kGq4MNtvXp0Ufx8Y2eGbHvoPxr3jZ1Dw"
    for scheme, digest in (("{SHA}", sha), ("{SSHA}", ssha)):
        for text in (f"userPassword: {scheme}{digest}", f"slappasswd printed {scheme}{digest}\n"):
            assert f"{scheme}{credential_ref(digest)}" in redact_text(text)
        json_form = redact_text(f'{{"userPassword": "{scheme}{digest}"}}')  # the keyed pass takes the value whole
        assert digest[:-1] not in json_form and "credential_ref:" in json_form
