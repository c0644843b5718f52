"""More fake credential formats for the table (tests/credential_table.py): issue 32's six kinds the
export still leaked (age keys, Discord webhooks, `docker login -p`, htpasswd lines, Mailgun keys,
`requests` `auth=(…)` tuples), then the formats of the cloud, code-hosting, chat, payment, registry
and secret-manager providers (more in tests/credential_table_files.py).
Every maker: `maker(rng) -> (text as it appears in a session, secrets that must not survive)`.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable

from tests.credential_samples import ALNUM, B64, B64URL, DIGITS, HEX, LOWER, UPPER, rand
from tests.credential_samples import assembled as _p

Made = tuple[str, tuple[str, ...]]
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
CRYPT = ALNUM + "./"


# ---- issue 32's six


def age_secret_key(rng: random.Random) -> Made:
    key = _p("AGE-SECRET", "-KEY-1") + rand(rng, BECH32, 58)
    return f"# created: 2026-11-26T10:00:00Z\n# public key: age1{rand(rng, LOWER + DIGITS, 58)}\n{key}", (key[16:],)


def discord_webhook(rng: random.Random) -> Made:
    token = rand(rng, B64URL, 68)
    return f"WEBHOOK=https://discord.com/api/webhooks/{rand(rng, DIGITS, 18)}/{token}", (token,)


def docker_login_p(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"docker login -u ci -p {password} registry.example.com", (password,)


def htpasswd_apr1(rng: random.Random) -> Made:
    digest = rand(rng, CRYPT, 22)
    return f"admin:$apr1${rand(rng, CRYPT, 8)}${digest}\n", (digest,)


def htpasswd_bcrypt(rng: random.Random) -> Made:
    digest = rand(rng, CRYPT, 53)
    return f"deploy:$2y$10${digest}", (digest,)


def ldap_sha(rng: random.Random) -> Made:
    digest = base64.b64encode(rng.randbytes(20 + rng.choice((0, 4)))).decode()  # SHA-1, salted or not
    scheme = "{SSHA}" if len(digest) > 28 else "{SHA}"
    return f"dn: uid=ci,ou=people,dc=example,dc=com\nuserPassword: {scheme}{digest}\n", (digest.rstrip("="),)


def mailgun_key(rng: random.Random) -> Made:
    key = "key-" + rand(rng, HEX, 32)
    return f'mailer = Mailgun(domain="mg.example.com", key="{key}")\nor {key} alone', (key[4:],)


def requests_auth_tuple(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    quote = rng.choice(["'", '"'])
    return f"r = requests.get(url, auth=({quote}admin{quote}, {quote}{password}{quote}))", (password,)


# ---- cloud


def aws_sts_json(rng: random.Random) -> Made:
    secret, session = rand(rng, B64, 40), rand(rng, B64, 300)
    creds = {"AccessKeyId": _p("AS", "IA") + rand(rng, UPPER + DIGITS, 16), "SecretAccessKey": secret}
    return json.dumps({"Credentials": {**creds, "SessionToken": session}}, indent=2), (secret, session[:40])


def aws_cli_configure(rng: random.Random) -> Made:
    secret = rand(rng, B64, 40)
    return f"aws configure set aws_secret_access_key {secret} --profile prod", (secret,)


def aws_presigned_url(rng: random.Random) -> Made:
    signature = rand(rng, HEX, 64)
    url = f"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={signature}"
    return url, (signature,)


def gcp_oauth_refresh(rng: random.Random) -> Made:
    token = "1//0" + rand(rng, B64URL, 60)
    return f"refresh token: {token}", (token[4:],)


def azure_storage_connection(rng: random.Random) -> Made:
    key = base64.b64encode(rng.randbytes(64)).decode()
    text = f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={key};EndpointSuffix=core.windows.net"
    return text, (key[:30],)


def azure_sas_token(rng: random.Random) -> Made:
    sig = rand(rng, ALNUM, 40) + "%2B" + rand(rng, ALNUM, 3) + "%3D"
    return f"https://acme.blob.core.windows.net/c/f.zip?sv=2022-11-02&sp=r&se=2026-12-01&sig={sig}", (sig[:40],)


def azure_client_secret(rng: random.Random) -> Made:
    secret = rand(rng, ALNUM, 3) + "8Q~" + rand(rng, ALNUM + "._-", 34)
    return f"AZURE_CLIENT_SECRET={secret}", (secret,)


def gcp_service_account_escaped(rng: random.Random) -> Made:
    body = rand(rng, B64, 64)
    label = "PRIVATE KEY"
    key = f"-----BEGIN {label}-----\\nMIIE{body}\\n-----END {label}-----\\n"
    return f'{{"type": "service_account", "private_key": "{key}", "client_email": "a@p.iam.gserviceaccount.com"}}', (
        body,
    )


# ---- code hosting, CI, registries


def github_oauth(rng: random.Random) -> Made:
    token = _p("gh", "o_") + rand(rng, ALNUM, 36)
    return f"oauth_token: {token}", (token,)


def github_app_token_url(rng: random.Random) -> Made:
    token = _p("gh", "s_") + rand(rng, ALNUM, 36)
    return f"git clone https://x-access-token:{token}@github.com/o/r.git", (token,)


def gitlab_runner_token(rng: random.Random) -> Made:
    token = _p("gl", "rt-") + rand(rng, B64URL, 20)
    return f"gitlab-runner register --url https://gitlab.com --token {token}", (token,)


def gitlab_registration(rng: random.Random) -> Made:
    token = _p("GR13", "48941") + rand(rng, B64URL, 20)
    return f"registration: {token}", (token,)


def bitbucket_app_password(rng: random.Random) -> Made:
    token = _p("AT", "BB") + rand(rng, ALNUM, 32)
    return f"use {token} as the app password", (token,)


def docker_hub_pat(rng: random.Random) -> Made:
    token = _p("dckr", "_pat_") + rand(rng, B64URL, 27)
    return f"echo {token} | docker login -u me --password-stdin", (token,)


def pypirc(rng: random.Random) -> Made:
    token = _p("pypi-", "AgEIcHlwaS5vcmc") + rand(rng, B64URL, 60)
    return f"[pypi]\n  username = __token__\n  password = {token}\n", (token,)


def npmrc_auth(rng: random.Random) -> Made:
    encoded = base64.b64encode(f"ci:{rand(rng, ALNUM, 16)}".encode()).decode()
    return f"registry=https://npm.example.com/\n_auth={encoded}\nalways-auth=true", (encoded,)


def vault_token(rng: random.Random) -> Made:
    token = _p("hv", "s.") + rand(rng, B64URL, 90)
    return f"VAULT_TOKEN={token} vault kv get secret/app", (token,)


def vault_token_bare(rng: random.Random) -> Made:
    token = _p("hv", "s.") + rand(rng, B64URL, 24)
    return f"logged in with {token}", (token,)


def terraform_cloud(rng: random.Random) -> Made:
    tail = rand(rng, B64URL, 67)
    return f'credentials "app.terraform.io" {{ token = "{rand(rng, ALNUM, 14)}.atlasv1.{tail}" }}', (tail,)


def doppler_token(rng: random.Random) -> Made:
    token = _p("dp", ".st.") + "prd." + rand(rng, ALNUM, 40)
    return f"doppler run --token {token} -- ./app", (token,)


def heroku_key(rng: random.Random) -> Made:
    token = _p("HRKU", "-") + rand(rng, B64URL, 60)
    return f"heroku auth ok: {token}", (token,)


def heroku_api_key_uuid(rng: random.Random) -> Made:
    key = "-".join(rand(rng, HEX, n) for n in (8, 4, 4, 4, 12))
    return f"HEROKU_API_KEY={key}", (key,)


def digitalocean_token(rng: random.Random) -> Made:
    token = _p("do", "p_v1_") + rand(rng, HEX, 64)
    return f"doctl auth init -t {token}", (token,)


def netlify_token(rng: random.Random) -> Made:
    token = _p("nf", "p_") + rand(rng, ALNUM, 36)
    return f"deploying with {token}", (token,)


def supabase_token(rng: random.Random) -> Made:
    token = _p("sb", "p_") + rand(rng, HEX, 40)
    return f"supabase login --token {token}", (token,)


def fly_token(rng: random.Random) -> Made:
    token = _p("fo", "1_") + rand(rng, B64URL, 43)
    return f"flyctl: {token}", (token,)


# ---- chat, mail, payments, SaaS


def slack_user_token(rng: random.Random) -> Made:
    token = _p("xo", "xp-") + "-".join(rand(rng, DIGITS, 12) for _ in range(3)) + "-" + rand(rng, HEX, 32)
    return f"SLACK_USER_TOKEN: {token}", (token,)


def slack_app_token(rng: random.Random) -> Made:
    token = _p("xa", "pp-1-") + rand(rng, UPPER + DIGITS, 11) + "-" + rand(rng, DIGITS, 13) + "-" + rand(rng, HEX, 64)
    return f"app token {token}", (token,)


def telegram_bot_url(rng: random.Random) -> Made:
    token = rand(rng, DIGITS, 10) + ":AA" + rand(rng, B64URL, 33)
    return f"curl https://api.telegram.org/bot{token}/sendMessage -d chat_id=1", (token[11:],)


def twilio_auth_token(rng: random.Random) -> Made:
    token = rand(rng, HEX, 32)
    return f"client = Client('AC{rand(rng, HEX, 32)}', '{token}')\nTWILIO_AUTH_TOKEN={token}", (token,)


def twilio_api_key(rng: random.Random) -> Made:
    key = _p("S", "K") + rand(rng, HEX, 32)
    return f"api key sid {key}", (key,)


def stripe_restricted(rng: random.Random) -> Made:
    key = _p("rk", "_live_") + rand(rng, ALNUM, 99)
    return f"stripe --api-key {key} charges list", (key,)


def stripe_webhook_secret(rng: random.Random) -> Made:
    key = _p("wh", "sec_") + rand(rng, ALNUM, 32)
    return f"signing with {key}", (key,)


def square_token(rng: random.Random) -> Made:
    token = _p("EA", "AA") + rand(rng, B64URL, 60)
    return f"square access {token}", (token,)


def shopify_token(rng: random.Random) -> Made:
    token = _p("sh", "pat_") + rand(rng, HEX, 32)
    return f"X-Shopify-Access-Token: {token}", (token,)


def mailchimp_key(rng: random.Random) -> Made:
    key = rand(rng, HEX, 32) + "-us" + str(rng.randint(1, 21))
    return f"mailchimp = Client(); mailchimp.set_config({{'api_key': '{key}'}}) # or {key}", (key[:32],)


def linear_key(rng: random.Random) -> Made:
    key = _p("lin", "_api_") + rand(rng, ALNUM, 40)
    return f"LINEAR {key}", (key,)


def notion_secret(rng: random.Random) -> Made:
    key = _p("se", "cret_") + rand(rng, ALNUM, 43)
    return f"notion = Client(auth=os.environ.get('X', '{key}'))", (key,)


def notion_ntn(rng: random.Random) -> Made:
    key = _p("nt", "n_") + rand(rng, DIGITS, 11) + rand(rng, ALNUM, 35)
    return f"integration token {key}", (key,)


def atlassian_token(rng: random.Random) -> Made:
    token = _p("ATA", "TT3") + rand(rng, B64URL, 180)
    return f"jira --token {token}", (token[:40], token[-40:])


def postman_key(rng: random.Random) -> Made:
    key = _p("PM", "AK-") + rand(rng, HEX, 24) + "-" + rand(rng, HEX, 34)
    return f"newman run c.json --postman-api-key {key}", (key,)


def new_relic_key(rng: random.Random) -> Made:
    key = _p("NR", "AK-") + rand(rng, UPPER + DIGITS, 27)
    return f"NEW_RELIC_USER {key}", (key,)


def sentry_dsn(rng: random.Random) -> Made:
    public = rand(rng, HEX, 32)
    return f"SENTRY_DSN=https://{public}@o{rand(rng, DIGITS, 6)}.ingest.sentry.io/{rand(rng, DIGITS, 7)}", (public,)


def sentry_auth_token(rng: random.Random) -> Made:
    token = _p("sntr", "ys_") + rand(rng, B64, 80)
    return f"sentry-cli --auth-token {token} releases new 1.0", (token,)


def grafana_service_account(rng: random.Random) -> Made:
    token = _p("gl", "sa_") + rand(rng, ALNUM, 32) + "_" + rand(rng, HEX, 8)
    return f"grafana token {token}", (token,)


def datadog_keys(rng: random.Random) -> Made:
    api, app = rand(rng, HEX, 32), rand(rng, HEX, 40)
    return f"DD_API_KEY={api} DD_APP_KEY={app} datadog-agent run", (api, app)


def firebase_server_key(rng: random.Random) -> Made:
    key = _p("AA", "AA") + rand(rng, B64URL, 7) + ":" + rand(rng, B64URL, 140)
    return f"Authorization: key={key}", (key[12:60],)


def facebook_token(rng: random.Random) -> Made:
    token = _p("EA", "AB") + rand(rng, ALNUM, 150)
    return f"graph.facebook.com/me?access_token={token}", (token,)


def twitter_bearer(rng: random.Random) -> Made:
    token = "A" * 22 + rand(rng, ALNUM, 20) + "%3D" + rand(rng, ALNUM, 50)
    return f"TWITTER bearer {token}", (token[22:42], token[-50:])


def okta_ssws(rng: random.Random) -> Made:
    token = "00" + rand(rng, B64URL, 40)
    return f'curl -H "Authorization: SSWS {token}" https://acme.okta.com/api/v1/users', (token,)


def cloudflare_origin_ca(rng: random.Random) -> Made:
    key = "v1.0-" + rand(rng, HEX, 24) + "-" + rand(rng, HEX, 146)
    return f"origin ca key {key}", (key[5:50],)


Maker = Callable[[random.Random], Made]

MORE_KINDS: dict[str, Maker] = {
    name: maker
    for name, maker in globals().items()
    if callable(maker) and getattr(maker, "__module__", None) == __name__ and name[0].islower()
}
