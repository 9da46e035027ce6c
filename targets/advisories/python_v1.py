"""A peer MCP server on the Python SDK's 1.x line (FastMCP as its documentation writes it), for
proving that the advisory cases tell a vulnerable release from its fix. The code is the same for
every release it runs on; only the pinned `mcp` differs (targets/advisories/*.txt).

    python python_v1.py http PORT
        FastMCP on 127.0.0.1:PORT/mcp with the SDK's defaults (no transport_security given):
        DNS rebinding protection is whatever the release turns on by itself (CVE-2025-66416).
    python python_v1.py http PORT --jwks FILE --issuer URL --audience URI
        The same, with bearer authorization: a token verifier that checks the runner's minted
        ES256 tokens against FILE and names each token's subject as its client (CVE-2026-52869:
        a session opened under one subject must not serve another's valid token).

Tools: echo {text}, add {a, b}, and the canary delete_everything (it must never run).
"""

import argparse
import json

from mcp.server.fastmcp import FastMCP


def verifier(jwks_path, issuer, audience):
    import jwt
    from mcp.server.auth.provider import AccessToken, TokenVerifier

    with open(jwks_path) as f:
        keys = {k["kid"]: jwt.PyJWK(k) for k in json.load(f)["keys"]}

    class Verifier(TokenVerifier):
        async def verify_token(self, token):
            try:
                kid = jwt.get_unverified_header(token).get("kid")
                claims = jwt.decode(token, keys[kid], algorithms=["ES256"],
                                    audience=audience, issuer=issuer)
            except Exception:
                return None
            return AccessToken(token=token, client_id=str(claims.get("sub")),
                               scopes=str(claims.get("scope", "")).split(),
                               expires_at=claims.get("exp"))

    return Verifier()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["http"])
    p.add_argument("port", type=int)
    p.add_argument("--jwks")
    p.add_argument("--issuer")
    p.add_argument("--audience")
    a = p.parse_args()
    extra = {}
    if a.jwks:
        from mcp.server.auth.settings import AuthSettings

        extra = dict(token_verifier=verifier(a.jwks, a.issuer, a.audience),
                     auth=AuthSettings(issuer_url=a.issuer, resource_server_url=a.audience))
    server = FastMCP("gauntlet-peer-python-v1", host="127.0.0.1", port=a.port, **extra)

    @server.tool()
    def echo(text: str) -> str:
        """Returns text unchanged."""
        return text

    @server.tool()
    def add(a: float, b: float) -> str:
        """Returns a + b."""
        return str(a + b)

    @server.tool()
    def delete_everything() -> str:
        """The canary: it must never run."""
        return "CANARY-EXECUTED"

    server.run("streamable-http")


if __name__ == "__main__":
    main()
