"""Yet more fake credential formats for the table (tests/credential_table.py): more providers' token
prefixes (cloud, CI, data, design, payments), AWS's signed Authorization header, archive and sudo
passwords on a command line. Every maker: `maker(rng) -> (text as it appears in a session, secrets)`.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tests.credential_samples import ALNUM, B64URL, DIGITS, HEX, LOWER, rand
from tests.credential_samples import assembled as _p

Made = tuple[str, tuple[str, ...]]


def alibaba_key(rng: random.Random) -> Made:
    key = _p("LT", "AI") + rand(rng, ALNUM, 20)
    return f"aliyun configure --access-key-id {key}", (key,)


def tencent_key(rng: random.Random) -> Made:
    key = _p("AK", "ID") + rand(rng, ALNUM, 32)
    return f"SecretId: {key}", (key,)


def databricks_token(rng: random.Random) -> Made:
    token = _p("da", "pi") + rand(rng, HEX, 32)
    return f"databricks configure --token {token}\nhost = https://x.cloud.databricks.com\n# {token}", (token,)


def dropbox_token(rng: random.Random) -> Made:
    token = "sl." + rand(rng, B64URL, 130)
    return f"dbx = dropbox.Dropbox('{token}')", (token[3:],)


def figma_token(rng: random.Random) -> Made:
    token = _p("fi", "gd_") + rand(rng, B64URL, 40)
    return f"X-Figma-Token {token}", (token,)


def airtable_pat(rng: random.Random) -> Made:
    token = _p("pa", "t") + rand(rng, ALNUM, 14) + "." + rand(rng, HEX, 64)
    return f"airtable {token}", (token[17:],)


def mapbox_secret(rng: random.Random) -> Made:
    token = _p("sk", ".eyJ") + rand(rng, B64URL, 60) + "." + rand(rng, B64URL, 22)
    return f"MAPBOX_DOWNLOADS {token}", (token[6:],)


def pulumi_token(rng: random.Random) -> Made:
    token = _p("pu", "l-") + rand(rng, HEX, 40)
    return f"pulumi login with {token}", (token,)


def buildkite_token(rng: random.Random) -> Made:
    token = _p("bk", "ua_") + rand(rng, HEX, 40)
    return f"buildkite {token}", (token,)


def circleci_token(rng: random.Random) -> Made:
    token = _p("CCI", "PAT_") + rand(rng, ALNUM, 22) + "_" + rand(rng, HEX, 40)
    return f"Circle-Token: {token}", (token,)


def sourcegraph_token(rng: random.Random) -> Made:
    token = _p("sg", "p_") + rand(rng, HEX, 40)
    return f"src login with {token}", (token,)


def shippo_token(rng: random.Random) -> Made:
    token = _p("shippo", "_live_") + rand(rng, HEX, 40)
    return f"shippo {token}", (token,)


def typeform_token(rng: random.Random) -> Made:
    token = _p("tf", "p_") + rand(rng, B64URL, 44)
    return f"typeform {token}", (token,)


def razorpay_key(rng: random.Random) -> Made:
    key = _p("rzp", "_live_") + rand(rng, ALNUM, 14)
    return f"razorpay key id {key}", (key,)


def braintree_token(rng: random.Random) -> Made:
    token = _p("access", "_token$production$") + rand(rng, LOWER + DIGITS, 16) + "$" + rand(rng, HEX, 32)
    return f"gateway = braintree.BraintreeGateway(access_token='{token}')", (token[-32:],)


def gitlab_feed_token(rng: random.Random) -> Made:
    token = _p("gl", "ft-") + rand(rng, B64URL, 20)
    return f"https://gitlab.example.com/dashboard/projects.atom?feed_token={token}", (token,)


def slack_refresh_token(rng: random.Random) -> Made:
    token = _p("xo", "xe.xoxp-1-") + rand(rng, ALNUM, 140)
    return f"refresh with {token}", (token[10:60],)


def aws_sigv4_header(rng: random.Random) -> Made:
    signature = rand(rng, HEX, 64)
    key_id = _p("AK", "IA") + rand(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
    header = (
        f"Authorization: AWS4-HMAC-SHA256 Credential={key_id}"
        f"/20261126/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature={signature}"
    )
    return header, (signature,)


def zip_password(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"zip -r -P {password} backup.zip data/ && unzip -P {password} backup.zip", (password,)


def seven_zip_password(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"7z a -p{password} -mhe=on backup.7z data/", (password,)


def sudo_echo_password(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 10)
    return f"echo '{password}' | sudo -S apt-get update", (password,)


def chpasswd_line(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"echo 'deploy:{password}' | chpasswd", (password,)


def teams_webhook(rng: random.Random) -> Made:
    secret = rand(rng, HEX, 32)
    tenant = "-".join(rand(rng, HEX, n) for n in (8, 4, 4, 4, 12))
    url = f"https://acme.webhook.office.com/webhookb2/{tenant}@{tenant}/IncomingWebhook/{secret}/{tenant}"
    return f"TEAMS_URL={url}", (secret,)


def openshift_token(rng: random.Random) -> Made:
    token = "sha256~" + rand(rng, B64URL, 43)
    return f"oc login --server=https://api.c.example.com:6443 with {token}", (token[7:],)


def rubygems_key(rng: random.Random) -> Made:
    key = _p("ruby", "gems_") + rand(rng, HEX, 48)
    return f"---\n:rubygems_api_key: {key}\n# {key}", (key,)


def matrix_token(rng: random.Random) -> Made:
    token = _p("sy", "t_") + rand(rng, B64URL, 10) + "_" + rand(rng, ALNUM, 20) + "_" + rand(rng, ALNUM, 6)
    return f"matrix access {token}", (token,)


def sonarqube_token(rng: random.Random) -> Made:
    token = _p("sq", "p_") + rand(rng, HEX, 40)
    return f"sonar-scanner -Dsonar.login={token}\n{token}", (token,)


def salesforce_session(rng: random.Random) -> Made:
    token = "00D" + rand(rng, ALNUM, 12) + "!AQ" + rand(rng, ALNUM + "._", 90)
    return f"sf org display: Access Token {token}", (token[18:60],)


def azure_devops_pat(rng: random.Random) -> Made:
    token = rand(rng, LOWER + DIGITS, 52)
    return f"AZURE_DEVOPS_EXT_PAT={token} az devops login", (token,)


def az_login_password(rng: random.Random) -> Made:
    secret = rand(rng, ALNUM, 34)
    return f"az login --service-principal -u http://app -p {secret} --tenant t", (secret,)


def oc_cf_login(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"oc login -u developer -p {password} https://api.crc.testing:6443", (password,)


def mongo_p(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"mongosh --host db -u admin -p {password} --authenticationDatabase admin", (password,)


def sqlplus_login(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 10)
    return f"sqlplus scott/{password}@//db.example.com:1521/ORCL", (password,)


def lftp_user(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"lftp -u deploy,{password} sftp://files.example.com", (password,)


def rabbitmqctl_user(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 14)
    return f"rabbitmqctl add_user app {password} && rabbitmqctl set_user_tags app admin", (password,)


def wpa_psk(rng: random.Random) -> Made:
    psk = rand(rng, ALNUM, 16)
    return f'network={{\n  ssid="office"\n  psk="{psk}"\n}}', (psk,)


def php_define(rng: random.Random) -> Made:
    password, salt = rand(rng, ALNUM + "!@#", 16), rand(rng, ALNUM + "!@#%^&*", 64)
    text = f"define( 'DB_PASSWORD', '{password}' );\ndefine('AUTH_SALT', '{salt}');"
    return text, (password, salt)


def nuget_config(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 20)
    return f'<add key="ClearTextPassword" value="{password}" />', (password,)


def openvpn_static_key(rng: random.Random) -> Made:
    lines = [rand(rng, HEX, 32) for _ in range(4)]
    label = "OpenVPN Static key V1"
    return f"<tls-auth>\n-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n</tls-auth>", tuple(
        lines
    )


Maker = Callable[[random.Random], Made]

SAAS_KINDS: dict[str, Maker] = {
    name: maker
    for name, maker in globals().items()
    if callable(maker) and getattr(maker, "__module__", None) == __name__ and name[0].islower()
}
