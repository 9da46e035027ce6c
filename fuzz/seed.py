"""Regenerate fuzz/seeds/ from the catalogue: every case body that is a small literal becomes a
seed of canonical_bytes (as is) and of differential (prefixed with 0x01, its raw-bytes mode);
smuggle, proxy_roundtrip and binding get fixed pseudo-random blobs (their inputs are structured).

    python3 fuzz/seed.py
"""

import base64
import hashlib
import json
import pathlib
import random

root = pathlib.Path(__file__).resolve().parent
cases = root.parent / "cases"
seeds = root / "seeds"


def put(target, data):
    d = seeds / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


for path in sorted(cases.glob("*/*.json")):
    case = json.loads(path.read_text())
    body = case.get("request", {}).get("body")
    if not isinstance(body, dict):
        continue
    if "json" in body:
        data = json.dumps(body["json"], separators=(",", ":"), ensure_ascii=False).encode()
    elif "text" in body:
        data = body["text"].encode()
    elif "base64" in body:
        data = base64.b64decode(body["base64"])
    else:
        continue
    # Placeholders get the witness policy's values.
    data = data.replace(b"{{denied_tool}}", b"delete_everything").replace(b"{{allowed_tool}}", b"echo")
    data = data.replace(b"{{denied_tool_b64}}", b"ZGVsZXRlX2V2ZXJ5dGhpbmc=").replace(b"{{allowed_tool_b64}}", b"ZWNobw==")
    # `{{meta}}` as a 2026-07-28 request carries it.
    data = data.replace(
        b"{{meta}}",
        b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}',
    )
    if len(data) <= 4096:
        put("canonical_bytes", data)
        put("differential", b"\x01" + data)

rng = random.Random(20261130)
for target in ("smuggle", "proxy_roundtrip", "differential"):
    for _ in range(32):
        blob = bytes(rng.randrange(256) for _ in range(48))
        put(target, blob if target != "differential" else b"\x00" + blob)

brng = random.Random(20261201)
for _ in range(32):
    put("binding", bytes(brng.randrange(256) for _ in range(16)))
