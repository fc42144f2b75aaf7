"""An OpenID provider of the test suite's own, on loopback (Flask and Authlib's JOSE).

It requires PKCE S256, signs ID tokens with RS256 under a key it can rotate, and can
be switched to each fault a relying party must refuse. Started by the SSO tests:

    python sso_provider.py <port>

Control (JSON bodies):
  POST /control/user   {"sub", "email", "email_verified", "groups", ...}: who signs in
  POST /control/fault  {"fault": none|issuer|audience|azp|expired|future|nonce|
                                 alg-none|alg-hs256|unknown-kid}
  POST /control/rotate  a new signing key; the old one leaves the key set
  GET  /control/counts  {"jwks": n, "token": n}
"""

import base64
import hashlib
import json
import secrets
import sys
import threading
import time
import urllib.parse

from authlib.jose import JsonWebKey, jwt
from flask import Flask, jsonify, redirect, request

PORT = int(sys.argv[1])
ISSUER = f"http://127.0.0.1:{PORT}"
CLIENT_SECRET = "authlib-client-secret"

app = Flask(__name__)
lock = threading.Lock()
state = {
    "user": {"sub": "someone", "email": "someone@example.org", "email_verified": True},
    "fault": "none",
    "codes": {},
    "counts": {"jwks": 0, "token": 0},
}


def new_key():
    kid = secrets.token_hex(8)
    return JsonWebKey.generate_key("RSA", 2048, is_private=True, options={"kid": kid})


state["key"] = new_key()


@app.get("/.well-known/openid-configuration")
def discovery():
    return jsonify({
        "issuer": ISSUER,
        "authorization_endpoint": f"{ISSUER}/authorize",
        "token_endpoint": f"{ISSUER}/token",
        "jwks_uri": f"{ISSUER}/jwks",
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    })


@app.get("/jwks")
def jwks():
    with lock:
        state["counts"]["jwks"] += 1
        public = state["key"].as_dict(is_private=False)
    public["use"] = "sig"
    public["alg"] = "RS256"
    return jsonify({"keys": [public]})


@app.get("/authorize")
def authorize():
    args = request.args
    if args.get("response_type") != "code":
        return "response_type must be code", 400
    if args.get("code_challenge_method") != "S256" or not args.get("code_challenge"):
        return "PKCE S256 is required", 400
    if not args.get("nonce") or not args.get("state"):
        return "state and nonce are required", 400
    code = secrets.token_urlsafe(24)
    with lock:
        state["codes"][code] = {
            "client_id": args.get("client_id"),
            "redirect_uri": args.get("redirect_uri"),
            "challenge": args["code_challenge"],
            "nonce": args["nonce"],
            "user": dict(state["user"]),
        }
    query = urllib.parse.urlencode({"code": code, "state": args["state"]})
    return redirect(f"{args.get('redirect_uri')}?{query}", code=302)


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@app.post("/token")
def token():
    auth = request.authorization
    if auth is None or auth.password != CLIENT_SECRET:
        return jsonify({"error": "invalid_client"}), 401
    form = request.form
    with lock:
        state["counts"]["token"] += 1
        grant = state["codes"].pop(form.get("code", ""), None)
        fault = state["fault"]
        key = state["key"]
    if grant is None or grant["redirect_uri"] != form.get("redirect_uri"):
        return jsonify({"error": "invalid_grant"}), 400
    verifier = form.get("code_verifier", "")
    if b64(hashlib.sha256(verifier.encode()).digest()) != grant["challenge"]:
        return jsonify({"error": "invalid_grant", "error_description": "PKCE"}), 400
    now = int(time.time())
    claims = dict(grant["user"])
    claims.update({
        "iss": ISSUER,
        "aud": auth.username,
        "iat": now,
        "exp": now + 300,
        "nonce": grant["nonce"],
    })
    if fault == "issuer":
        claims["iss"] = ISSUER + "/other-tenant"
    elif fault == "audience":
        claims["aud"] = "another-client"
    elif fault == "azp":
        claims["aud"] = [auth.username, "another-client"]
        claims["azp"] = "another-client"
    elif fault == "expired":
        claims["iat"] = now - 600
        claims["exp"] = now - 120
    elif fault == "future":
        claims["iat"] = now + 600
        claims["exp"] = now + 900
    elif fault == "nonce":
        claims["nonce"] = "not-the-nonce"
    if fault == "alg-none":
        header = b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
        id_token = f"{header}.{b64(json.dumps(claims).encode())}."
    elif fault == "alg-hs256":
        id_token = jwt.encode({"alg": "HS256", "typ": "JWT"}, claims, CLIENT_SECRET).decode()
    elif fault == "unknown-kid":
        stranger = new_key()
        id_token = jwt.encode({"alg": "RS256", "kid": stranger.kid}, claims, stranger).decode()
    else:
        id_token = jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key).decode()
    return jsonify({
        "access_token": secrets.token_urlsafe(24),
        "token_type": "Bearer",
        "expires_in": 300,
        "id_token": id_token,
    })


@app.post("/control/user")
def set_user():
    with lock:
        state["user"] = request.get_json()
    return "", 204


@app.post("/control/fault")
def set_fault():
    with lock:
        state["fault"] = request.get_json()["fault"]
    return "", 204


@app.post("/control/rotate")
def rotate():
    with lock:
        state["key"] = new_key()
    return "", 204


@app.get("/control/counts")
def counts():
    with lock:
        return jsonify(state["counts"])


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=PORT, threaded=True)
