"""Still more fake credential formats for the table (tests/credential_table.py): model providers'
keys, private-key files and blocks, connection strings, config files and command lines. Every maker:
`maker(rng) -> (text as it appears in a session, secrets that must not survive)`.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable

from tests.credential_samples import ALNUM, B64, B64URL, DIGITS, HEX, LOWER, rand
from tests.credential_samples import assembled as _p

Made = tuple[str, tuple[str, ...]]
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
CRYPT = ALNUM + "./"


# ---- model providers


def replicate_token(rng: random.Random) -> Made:
    token = _p("r", "8_") + rand(rng, ALNUM, 37)
    return f"REPLICATE {token}", (token,)


def groq_key(rng: random.Random) -> Made:
    key = _p("gs", "k_") + rand(rng, ALNUM, 52)
    return f"client = Groq(api_key={key!r})", (key,)


def openrouter_key(rng: random.Random) -> Made:
    key = _p("sk", "-or-v1-") + rand(rng, HEX, 64)
    return f"using {key} for openrouter", (key,)


def xai_key(rng: random.Random) -> Made:
    key = _p("xa", "i-") + rand(rng, ALNUM, 80)
    return f"grok via {key}", (key,)


def perplexity_key(rng: random.Random) -> Made:
    key = _p("pp", "lx-") + rand(rng, ALNUM, 48)
    return f"pplx {key}", (key,)


def nvidia_key(rng: random.Random) -> Made:
    key = _p("nv", "api-") + rand(rng, B64URL, 64)
    return f"NIM {key}", (key,)


def langsmith_key(rng: random.Random) -> Made:
    key = _p("lsv2", "_pt_") + rand(rng, HEX, 32) + "_" + rand(rng, HEX, 10)
    return f"tracing to {key}", (key,)


def anthropic_admin_key(rng: random.Random) -> Made:
    key = _p("sk", "-ant-admin01-") + rand(rng, B64URL, 93) + "AA"
    return f"x-api-key: {key}", (key,)


def huggingface_org(rng: random.Random) -> Made:
    key = _p("api", "_org_") + rand(rng, ALNUM, 34)
    return f"HF org {key}", (key,)


# ---- keys and blocks


def ec_private_key(rng: random.Random) -> Made:
    body = [rand(rng, B64, 64), rand(rng, B64, 56)]
    label = "EC PRIVATE KEY"
    return f"-----BEGIN {label}-----\n" + "\n".join(body) + f"\n-----END {label}-----", tuple(b[:30] for b in body)


def pgp_private_block(rng: random.Random) -> Made:
    body = [rand(rng, B64, 64) for _ in range(4)]
    label = "PGP PRIVATE KEY BLOCK"
    text = f"-----BEGIN {label}-----\nVersion: GnuPG v2\n\n" + "\n".join(body) + f"\n=AbCd\n-----END {label}-----"
    return text, tuple(b[:30] for b in body)


def encrypted_private_key(rng: random.Random) -> Made:
    body = [rand(rng, B64, 64) for _ in range(3)]
    label = "ENCRYPTED PRIVATE KEY"
    return f"-----BEGIN {label}-----\n" + "\n".join(body) + f"\n-----END {label}-----", tuple(b[:30] for b in body)


def putty_private_key(rng: random.Random) -> Made:
    lines = [rand(rng, B64, 64) for _ in range(3)]
    text = (
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ci\nPublic-Lines: 2\n"
        f"{rand(rng, B64, 64)}\n{rand(rng, B64, 20)}\nPrivate-Lines: 3\n" + "\n".join(lines) + "\nPrivate-MAC: ab12"
    )
    return text, tuple(line[:30] for line in lines)


def wireguard_config(rng: random.Random) -> Made:
    private, shared = base64.b64encode(rng.randbytes(32)).decode(), base64.b64encode(rng.randbytes(32)).decode()
    text = f"[Interface]\nPrivateKey = {private}\nAddress = 10.8.0.2/24\n[Peer]\nPresharedKey = {shared}\n"
    return text, (private[:30], shared[:30])


def kubeconfig_token(rng: random.Random) -> Made:
    token = rand(rng, ALNUM, 6) + "." + rand(rng, LOWER + DIGITS, 16)
    key_data = base64.b64encode(rng.randbytes(96)).decode()
    text = f"users:\n- name: admin\n  user:\n    token: {token}\n    client-key-data: {key_data}\n"
    return text, (token, key_data[:40])


def eth_private_key(rng: random.Random) -> Made:
    key = "0x" + rand(rng, HEX, 64)
    return f"PRIVATE_KEY={key} npx hardhat run deploy.js", (key[2:],)


def mnemonic_phrase(rng: random.Random) -> Made:
    words = " ".join(rng.choice(["abandon", "zoo", "ladder", "orbit", "quartz", "velvet", "mango"]) for _ in range(12))
    return f'MNEMONIC="{words}"', (words,)


# ---- connection strings and config files


def mongodb_srv(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 16)
    return f'mongosh "mongodb+srv://app:{password}@cluster0.ab1cd.mongodb.net/prod"', (password,)


def redis_url_no_user(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 20)
    return f"REDIS_URL=redis://:{password}@cache.internal:6379/0", (password,)


def amqp_url(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"broker_url = 'amqp://guest:{password}@mq:5672//'", (password,)


def jdbc_url(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"jdbc:postgresql://db:5432/app?user=app&password={password}&ssl=true", (password,)


def ado_connection(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 10) + "!"
    return f"Server=tcp:db.example.com,1433;Database=app;User ID=sa;Password={password};Encrypt=True;", (password,)


def odbc_pwd(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"DRIVER={{ODBC Driver 18}};SERVER=db;UID=sa;PWD={password};", (password,)


def pgpass_line(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 14)
    return f"db.example.com:5432:app:app_user:{password}\n", (password,)


def xml_password(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 14)
    return f"<server>\n  <id>nexus</id>\n  <username>ci</username>\n  <password>{password}</password>\n</server>", (
        password,
    )


def env_file(rng: random.Random) -> Made:
    secret, password = rand(rng, ALNUM, 32), rand(rng, ALNUM, 10)
    return f"APP_ENV=prod\nJWT_SECRET={secret}\nDB_PASS={password}\n", (secret, password)


def yaml_passwd(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 9)
    return f"db:\n  user: app\n  passwd: {password}\n", (password,)


def ini_secret(rng: random.Random) -> Made:
    secret = rand(rng, ALNUM, 24)
    return f"[oauth]\nclient_id = app\nclient_secret = {secret}\n", (secret,)


def toml_password(rng: random.Random) -> Made:
    password = rand(rng, ALNUM + "#%&", 14)
    return f'[database]\npassword = "{password}"\n', (password,)


def spring_properties(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"spring.datasource.password={password}\nspring.datasource.username=app", (password,)


def git_credentials(rng: random.Random) -> Made:
    token = rand(rng, ALNUM, 30)
    return f"https://oauth2:{token}@gitlab.example.com\n", (token,)


# ---- command lines


def curl_bearer_header(rng: random.Random) -> Made:
    token = rand(rng, B64URL, 36)
    return f"curl -H 'Authorization: Bearer {token}' https://api.example.com/me", (token,)


def pgpassword_env(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 11)
    return f"PGPASSWORD={password} psql -h db -U app -c 'select 1'", (password,)


def mysql_quoted_p(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 10)
    return f"mysqldump -u root -p'{password}' shop > shop.sql", (password,)


def redis_cli_a(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 16)
    return f"redis-cli -h cache -a {password} ping", (password,)


def sqlcmd_p(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f'sqlcmd -S db -U sa -P "{password}" -Q "select 1"', (password,)


def ldap_w(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f'ldapsearch -x -D "cn=admin,dc=example,dc=com" -w {password} -b dc=example,dc=com', (password,)


def smbclient_user(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 10)
    return f"smbclient //fs/share -U admin%{password} -c ls", (password,)


def openssl_passin(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"openssl pkcs12 -export -in c.pem -out c.p12 -passout pass:{password}", (password,)


def keytool_storepass(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 10)
    return f"keytool -list -keystore k.jks -storepass {password} -keypass {password}", (password,)


def htpasswd_b(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 10)
    return f"htpasswd -bc /etc/nginx/.htpasswd admin {password}", (password,)


def helm_repo_password(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 14)
    return f"helm repo add charts https://charts.example.com --username ci --password {password}", (password,)


def podman_login(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"podman login quay.io -u robot -p {password}", (password,)


def requests_basic_auth(rng: random.Random) -> Made:
    password = rand(rng, ALNUM, 12)
    return f"session.auth = HTTPBasicAuth('svc', '{password}')", (password,)


Maker = Callable[[random.Random], Made]

FILE_KINDS: dict[str, Maker] = {
    name: maker
    for name, maker in globals().items()
    if callable(maker) and getattr(maker, "__module__", None) == __name__ and name[0].islower()
}
