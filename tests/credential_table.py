"""A table of fake credential formats, generated at runtime (no real secret, nothing a secret scanner
would flag in the repository: every well-known prefix is assembled from pieces).

`KINDS` maps a name to a maker: `maker(rng) -> Sample(text, secrets)`, where `text` is the credential
as it appears in a session (a header, a config line, a URL, a JSON fragment…) and `secrets` are the
substrings that must never survive redaction. `samples(seed)` gives one sample of every kind.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable

from tests.credential_samples import ALNUM, B64, B64URL, DIGITS, HEX, LOWER, UPPER, Sample, rand
from tests.credential_samples import assembled as _p
from tests.credential_table_files import FILE_KINDS
from tests.credential_table_more import MORE_KINDS
from tests.credential_table_saas import SAAS_KINDS


def aws_access_key_id(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    key = _p("AK", "IA") + rand(rng, UPPER + "234567", 16)
    return f"export AWS_ACCESS_KEY_ID={key}", (key,)


def aws_secret_ini(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    secret = rand(rng, B64, 40)
    return f"[default]\naws_secret_access_key = {secret}\nregion = eu-west-1", (secret,)


def aws_secret_env(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    secret = rand(rng, B64, 40)
    return f"AWS_SECRET_ACCESS_KEY={secret} aws s3 ls", (secret,)


def _pem(rng: random.Random, label: str, first: str = "") -> tuple[str, tuple[str, ...]]:
    lines = [first + rand(rng, B64, 64 - len(first))] + [rand(rng, B64, 64) for _ in range(5)] + [rand(rng, B64, 24)]
    body = "\n".join(lines)
    text = f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"
    return text, tuple(line[:24] for line in lines) + tuple(line[-24:] for line in lines)


def rsa_private_key(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    return _pem(rng, "RSA PRIVATE KEY", "MIIEow")


def openssh_private_key(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    return _pem(rng, "OPENSSH PRIVATE KEY", "b3BlbnNzaC1rZXktdjEAAAAA")


def postgres_url(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    password = rand(rng, ALNUM, 14)
    return f"DATABASE_URL=postgres://app_user:{password}@db.internal:5432/app", (password,)


def https_url_password(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    password = rand(rng, ALNUM, 10) + "~!"
    return f"git clone https://deploy:{password}@git.example.com/team/repo.git", (password,)


def bearer_json(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    token = rand(rng, B64URL + ".", 40)
    payload = {"url": "https://api.example.com/v1/items", "headers": {"Authorization": f"Bearer {token}"}}
    return json.dumps(payload), (token,)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def jwt(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": rand(rng, DIGITS, 10), "name": rand(rng, LOWER, 8)}).encode())
    signature = rand(rng, B64URL, 43)
    return f"the cookie held {header}.{payload}.{signature} until logout", (payload, signature)


def cookie_sessionid(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    session = rand(rng, HEX, 32)
    csrf = rand(rng, ALNUM, 32)
    return f"Cookie: sessionid={session}; csrftoken={csrf}", (session, csrf)


def hex_header_token(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    token = rand(rng, HEX, 40)
    return f"curl -H 'X-Auth-Token: {token}' https://ci.example.com/api", (token,)


def netrc_password(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    password = rand(rng, ALNUM, 9)
    return f"machine api.example.com\n  login alice\n  password {password}\n", (password,)


def short_password_kv(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    password = "P" + rand(rng, DIGITS, 2) + "!"
    return f"mysql --user=root password={password} --host db", (password,)


def short_password_json(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    password = "q" + rand(rng, DIGITS, 2) + "#x"
    return json.dumps({"username": "bob", "password": password}), (password,)


def slack_after_escaped_newline(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    token = _p("xo", "xb-") + rand(rng, DIGITS, 11) + "-" + rand(rng, DIGITS, 13) + "-" + rand(rng, ALNUM, 24)
    # As it appears inside a JSON-encoded string: an escaped newline right before the token.
    return '{"output": "posting to #ops\\n' + token + '", "exit_code": 0}', (token,)


def github_classic(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    token = _p("gh", "p_") + rand(rng, ALNUM, 36)
    return f"git remote set-url origin https://x:{token}@github.com/o/r.git; GH_TOKEN={token}", (token,)


def github_fine_grained(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    token = _p("github", "_pat_") + rand(rng, ALNUM, 22) + "_" + rand(rng, ALNUM, 59)
    return f"use {token} for the API", (token,)


def openai_key(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    key = _p("sk", "-proj-") + rand(rng, B64URL, 48)
    return f'client = OpenAI(api_key="{key}")', (key,)


def anthropic_key(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    key = _p("sk", "-ant-", "api03-") + rand(rng, B64URL, 93) + "AA"
    return f"ANTHROPIC_API_KEY: {key}", (key,)


def stripe_key(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    key = _p("sk", "_live_") + rand(rng, ALNUM, 24)
    return f"stripe.api_key = '{key}'  # prod", (key,)


def google_api_key(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    key = _p("AI", "za") + rand(rng, B64URL, 35)
    return f"https://maps.googleapis.com/maps/api/geocode/json?address=x&key={key}", (key,)


def generic_api_key(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    key = rand(rng, LOWER + DIGITS, 24)
    return f"SERVICE_API_KEY={key}", (key,)


def yaml_token(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    token = rand(rng, ALNUM, 20)
    return f"registry:\n  token: {token}\n  url: https://registry.example.com", (token,)


def basic_auth(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    user, password = rand(rng, LOWER, 6), rand(rng, ALNUM, 12)
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
    return f"Authorization: Basic {encoded}", (encoded,)


def django_secret_key(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    key = "django-insecure-" + rand(rng, LOWER + DIGITS + "!@#$%^&*(-_=+)", 50)
    return f"SECRET_KEY = '{key}'\nDEBUG = True", (key[16:],)


def gitlab_token(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    token = _p("gl", "pat-") + rand(rng, B64URL, 20)
    return f"PRIVATE-TOKEN: {token}", (token,)


def password_cli_flag(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    password = rand(rng, ALNUM, 11)
    return f"pg_dump --password {password} --host db app > dump.sql", (password,)


def mysql_url(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    password = rand(rng, ALNUM, 8)
    return f"mysql://root:{password}@127.0.0.1:3306/shop", (password,)


def slack_webhook(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    path = "T" + rand(rng, UPPER + DIGITS, 10) + "/B" + rand(rng, UPPER + DIGITS, 10) + "/" + rand(rng, ALNUM, 24)
    return f"webhook: https://hooks.slack.com/services/{path}", (path.rsplit("/", 1)[1],)


def npm_token(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    token = _p("np", "m_") + rand(rng, ALNUM, 36)
    return f"//registry.npmjs.org/:_authToken={token}", (token,)


def huggingface_token(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    token = _p("h", "f_") + rand(rng, ALNUM, 34)
    return f"huggingface-cli login --token {token}", (token,)


def sendgrid_key(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    key = _p("S", "G.") + rand(rng, B64URL, 22) + "." + rand(rng, B64URL, 43)
    return f"mail via {key}", (key,)


def private_key_json(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    """A service-account file (how GCP keys appear in tool output): the PEM body is JSON-escaped."""
    text, secrets = _pem(rng, "PRIVATE KEY", "MIIEvQ")
    return json.dumps({"type": "service_account", "private_key": text + "\n"}), secrets


# ---- issue 21: the kinds the export still leaked, and names holding auth/token/secret/key


def curl_user_password(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    password = rand(rng, ALNUM, 12)
    return f"curl -u deploy:{password} https://api.example.com/v1/items", (password,)


def curl_user_option_long(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    password = rand(rng, ALNUM, 8) + "!"
    return f"wget -q --user=ops:{password} https://files.example.com/a.tgz", (password,)


def sshpass_password(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    password = rand(rng, ALNUM, 10)
    quote = rng.choice(["", "'", '"'])
    return f"sshpass -p {quote}{password}{quote} ssh admin@build.example.com uptime", (password,)


def mysql_glued_password(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    password = rand(rng, ALNUM, 9)
    return f"mysql -h db -uroot -p{password} shop -e 'select 1'", (password,)


def docker_config_auth(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    encoded = base64.b64encode(f"{rand(rng, LOWER, 6)}:{rand(rng, ALNUM, 14)}".encode()).decode()
    config = {"auths": {"https://index.docker.io/v1/": {"auth": encoded}}, "credsStore": ""}
    return json.dumps(config, indent=1), (encoded,)


def discord_bot_token(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    user_id = base64.b64encode(rand(rng, DIGITS, 18).encode()).decode().rstrip("=")
    token = f"{user_id}.{rand(rng, B64URL, 6)}.{rand(rng, B64URL, 38)}"
    return f'client.run("{token}")', (token, token.rsplit(".", 1)[1])


def x_auth_hex_header(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    token = rand(rng, HEX, 40)
    return f"curl -H 'X-Auth: {token}' https://ci.example.com/api/builds", (token,)


def api_secret_prose(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    secret = rand(rng, HEX, 40)
    return f"The api secret {secret} is for staging only.", (secret,)


def auth_key_option(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    key = rand(rng, ALNUM, 28)
    return f"tailscale up --auth-key {key} --hostname ci", (key,)


def secret_header(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    secret = rand(rng, LOWER + DIGITS, 32)
    return f'requests.post(url, headers={{"X-Webhook-Secret": "{secret}"}})', (secret,)


def token_option_hex(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    token = rand(rng, HEX, 64)
    return f"vault login -method=token token {token}", (token,)


Maker = Callable[[random.Random], tuple[str, tuple[str, ...]]]

KINDS: dict[str, Maker] = {
    "aws_access_key_id": aws_access_key_id,
    "aws_secret_ini": aws_secret_ini,
    "aws_secret_env": aws_secret_env,
    "rsa_private_key": rsa_private_key,
    "openssh_private_key": openssh_private_key,
    "private_key_json": private_key_json,
    "postgres_url": postgres_url,
    "https_url_password": https_url_password,
    "mysql_url": mysql_url,
    "bearer_json": bearer_json,
    "jwt": jwt,
    "cookie_sessionid": cookie_sessionid,
    "hex_header_token": hex_header_token,
    "netrc_password": netrc_password,
    "short_password_kv": short_password_kv,
    "short_password_json": short_password_json,
    "slack_after_escaped_newline": slack_after_escaped_newline,
    "github_classic": github_classic,
    "github_fine_grained": github_fine_grained,
    "openai_key": openai_key,
    "anthropic_key": anthropic_key,
    "stripe_key": stripe_key,
    "google_api_key": google_api_key,
    "generic_api_key": generic_api_key,
    "yaml_token": yaml_token,
    "basic_auth": basic_auth,
    "django_secret_key": django_secret_key,
    "gitlab_token": gitlab_token,
    "password_cli_flag": password_cli_flag,
    "slack_webhook": slack_webhook,
    "npm_token": npm_token,
    "huggingface_token": huggingface_token,
    "sendgrid_key": sendgrid_key,
    "curl_user_password": curl_user_password,
    "curl_user_option_long": curl_user_option_long,
    "sshpass_password": sshpass_password,
    "mysql_glued_password": mysql_glued_password,
    "docker_config_auth": docker_config_auth,
    "discord_bot_token": discord_bot_token,
    "x_auth_hex_header": x_auth_hex_header,
    "api_secret_prose": api_secret_prose,
    "auth_key_option": auth_key_option,
    "secret_header": secret_header,
    "token_option_hex": token_option_hex,
    **MORE_KINDS,
    **FILE_KINDS,
    **SAAS_KINDS,
}


def sample(kind: str, rng: random.Random) -> Sample:
    text, secrets = KINDS[kind](rng)
    return Sample(kind, text, secrets)


def samples(seed: int = 0) -> list[Sample]:
    rng = random.Random(seed)
    return [sample(kind, rng) for kind in KINDS]


def leaked(sample: Sample, output: str) -> list[str]:
    """The secrets of `sample` still in `output` (as written, or JSON-escaped)."""
    found = []
    for secret in sample.secrets:
        escaped = json.dumps(secret)[1:-1]
        if secret in output or escaped in output:
            found.append(secret)
    return found
