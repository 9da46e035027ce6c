//! The suite's side of MCP authorization: a fixture token issuer and the tokens the `auth/`
//! cases send.
//!
//! An endpoint that claims authorization is given a good token (`--auth-token`), and, when the
//! runner may mint tokens itself, the issuer's private key (`--auth-issuer-key`, with the
//! issuer and the audience the endpoint expects). From those the runner derives every bad token
//! a case names: `alg: none`, a broken signature, expired, not yet valid, for another audience,
//! from another issuer, HMAC-signed with the issuer's public key, and a token without the scope
//! a tool needs. Keys are made at run or test time ([`Issuer::generate`]); none is committed.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use std::time::{SystemTime, UNIX_EPOCH};

/// Why the auth inputs cannot be used. Kinds matter, text does not.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthInputError {
    #[error("cannot make or read the issuer's key (an EC P-256 private key in PKCS#8 PEM)")]
    Key(#[source] rcgen::Error),
    #[error("cannot sign a token")]
    Sign(#[source] jsonwebtoken::errors::Error),
    #[error("--auth-token is not a JWT (three base64url parts separated by dots)")]
    NotAJwt,
}

/// An ES256 token issuer whose key exists for one run or test.
pub struct Issuer {
    /// `iss` of the tokens it mints.
    pub issuer: String,
    /// `kid` of its key.
    pub kid: String,
    key: rcgen::KeyPair,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("issuer", &self.issuer)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// What a minted token claims.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Claims {
    pub iss: String,
    pub aud: String,
    pub sub: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub scope: String,
    pub iat: u64,
    pub nbf: u64,
    pub exp: u64,
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Issuer {
    /// A new P-256 key.
    pub fn generate(issuer: &str, kid: &str) -> Result<Issuer, AuthInputError> {
        Ok(Issuer {
            issuer: issuer.to_string(),
            kid: kid.to_string(),
            key: rcgen::KeyPair::generate().map_err(AuthInputError::Key)?,
        })
    }

    /// A key from PKCS#8 PEM (what [`Issuer::private_pem`] writes).
    pub fn from_pem(issuer: &str, kid: &str, pem: &str) -> Result<Issuer, AuthInputError> {
        Ok(Issuer {
            issuer: issuer.to_string(),
            kid: kid.to_string(),
            key: rcgen::KeyPair::from_pem(pem).map_err(AuthInputError::Key)?,
        })
    }

    pub fn private_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// The public key as a JSON Web Key Set (what an endpoint validates tokens with).
    pub fn jwks(&self) -> String {
        let raw = self.key.public_key_raw();
        // SEC1 uncompressed point: 0x04, x (32 bytes), y (32 bytes).
        let (x, y) = if raw.len() == 65 {
            (&raw[1..33], &raw[33..65])
        } else {
            (&raw[..0], &raw[..0])
        };
        serde_json::json!({"keys": [{
            "kty": "EC",
            "crv": "P-256",
            "x": B64.encode(x),
            "y": B64.encode(y),
            "kid": self.kid,
            "alg": "ES256",
            "use": "sig",
        }]})
        .to_string()
    }

    /// Claims for `aud`, valid for an hour from now, granting `scope`.
    pub fn claims(&self, aud: &str, scope: &str) -> Claims {
        let t = now();
        Claims {
            iss: self.issuer.clone(),
            aud: aud.to_string(),
            sub: "gauntlet-fixture-user".into(),
            scope: scope.to_string(),
            iat: t,
            nbf: t,
            exp: t + 3600,
        }
    }

    /// An ES256 token with these claims, signed by this issuer's key.
    pub fn mint(&self, claims: &Claims) -> Result<String, AuthInputError> {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        let key = EncodingKey::from_ec_der(&self.key.serialize_der());
        jsonwebtoken::encode(&header, claims, &key).map_err(AuthInputError::Sign)
    }

    /// The algorithm-confusion token: HS256, its secret the issuer's public key (PEM), the way
    /// a validator that lets the token pick the algorithm would check it.
    pub(crate) fn mint_hmac_with_public_key(
        &self,
        claims: &Claims,
    ) -> Result<String, AuthInputError> {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(self.kid.clone());
        let key = EncodingKey::from_secret(self.key.public_key_pem().as_bytes());
        jsonwebtoken::encode(&header, claims, &key).map_err(AuthInputError::Sign)
    }
}

/// The three parts of a compact JWS, or `None`.
fn parts(token: &str) -> Option<(&str, &str, &str)> {
    let mut it = token.split('.');
    let (h, p, s) = (it.next()?, it.next()?, it.next()?);
    (it.next().is_none() && !h.is_empty() && !p.is_empty()).then_some((h, p, s))
}

/// `token` re-headed with `alg: none` and its signature dropped (same claims).
pub(crate) fn alg_none(token: &str) -> Result<String, AuthInputError> {
    let (_, payload, _) = parts(token).ok_or(AuthInputError::NotAJwt)?;
    let header = B64.encode(br#"{"alg":"none","typ":"JWT"}"#);
    Ok(format!("{header}.{payload}."))
}

/// `token` with its signature's bytes changed (same header and claims).
pub(crate) fn bad_signature(token: &str) -> Result<String, AuthInputError> {
    let (header, payload, sig) = parts(token).ok_or(AuthInputError::NotAJwt)?;
    let mut bytes = B64.decode(sig).map_err(|_| AuthInputError::NotAJwt)?;
    if bytes.is_empty() {
        return Err(AuthInputError::NotAJwt);
    }
    for b in bytes.iter_mut().take(8) {
        *b ^= 0x5a;
    }
    Ok(format!("{header}.{payload}.{}", B64.encode(bytes)))
}

/// What a run knows about an endpoint's authorization (all optional).
#[derive(Debug, Default)]
pub struct AuthInputs {
    /// A token the endpoint accepts; sent on every request unless a case says otherwise.
    pub token: Option<String>,
    /// The issuer whose key the runner may mint with, and the audience the endpoint expects.
    pub issuer: Option<(Issuer, String)>,
    /// Scopes of the tokens the runner mints as good ones.
    pub scopes: String,
    /// A tool the good token's scopes do not cover (`auth/` scope cases call it).
    pub scoped_tool: Option<String>,
    /// The `sub` of the tokens the runner mints as the caller's (the good one and its bad
    /// variants): the run's principal when a gate reads the caller from the token
    /// (`--identity bearer`); a fixed fixture user otherwise.
    pub subject: Option<String>,
}

/// Declares [`TokenKind`] with the placeholder each fills, the one spelling of its name.
macro_rules! token_kinds {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// What a token a run holds is; a case names it by the placeholder it fills.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum TokenKind {
            $($(#[$doc])* $variant,)*
        }

        impl TokenKind {
            /// Every kind, in declaration order.
            pub const ALL: &[TokenKind] = &[$(TokenKind::$variant),*];

            /// The placeholder it fills in a case (`{{token_good}}`).
            pub const fn placeholder(self) -> &'static str {
                match self {
                    $(TokenKind::$variant => $name,)*
                }
            }
        }

        /// The tokens `auth/` cases name, by placeholder (the case loader knows them from here).
        pub const TOKEN_PLACEHOLDERS: &[&str] = &[$($name),*];
    };
}

token_kinds! {
    /// The endpoint's good token: given (`--auth-token`) or minted.
    Good => "token_good",
    /// The good token with `alg: none` and no signature.
    AlgNone => "token_alg_none",
    /// The good token with its signature broken.
    BadSignature => "token_bad_signature",
    /// Minted: expired an hour ago.
    Expired => "token_expired",
    /// Minted: valid only from an hour from now.
    NotYetValid => "token_not_yet_valid",
    /// Minted for another resource.
    WrongAudience => "token_wrong_audience",
    /// Minted under another issuer's name.
    WrongIssuer => "token_wrong_issuer",
    /// HMAC-signed with the issuer's public key as the secret.
    HmacPublicKey => "token_hmac_public_key",
    /// Minted, good, for another user.
    OtherSubject => "token_other_subject",
}

/// The tokens a run holds, each by its kind, in the order they were made. Secrets, like
/// `--header` values: never shown in any output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthTokens(Vec<(TokenKind, String)>);

impl AuthTokens {
    /// The token of `kind`, when the run holds one.
    pub fn get(&self, kind: TokenKind) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, t)| t.as_str())
    }

    pub fn has(&self, kind: TokenKind) -> bool {
        self.get(kind).is_some()
    }

    /// Every token with its kind, in the order they were made.
    pub fn iter(&self) -> impl Iterator<Item = (TokenKind, &str)> {
        self.0.iter().map(|(k, t)| (*k, t.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn push(&mut self, kind: TokenKind, token: String) {
        self.0.push((kind, token));
    }
}

impl AuthInputs {
    /// The good token: the one given, or one minted.
    pub fn good(&self) -> Result<Option<String>, AuthInputError> {
        if let Some(t) = &self.token {
            return Ok(Some(t.clone()));
        }
        match &self.issuer {
            Some((issuer, aud)) => issuer.mint(&self.claims(issuer, aud)).map(Some),
            None => Ok(None),
        }
    }

    /// The good token's claims: the issuer's, with the run's subject when it has one.
    fn claims(&self, issuer: &Issuer, aud: &str) -> Claims {
        let mut c = issuer.claims(aud, &self.scopes);
        if let Some(sub) = &self.subject {
            c.sub = sub.clone();
        }
        c
    }

    /// A good token whose subject is `sub`, when the runner may mint (`None` without an
    /// issuer: the caller then presents `sub` itself as an opaque token).
    pub fn token_for_subject(&self, sub: &str) -> Result<Option<String>, AuthInputError> {
        match &self.issuer {
            Some((issuer, aud)) => {
                let claims = Claims {
                    sub: sub.to_string(),
                    ..issuer.claims(aud, &self.scopes)
                };
                issuer.mint(&claims).map(Some)
            }
            None => Ok(None),
        }
    }

    /// Every token the inputs can make, by kind.
    pub fn tokens(&self) -> Result<AuthTokens, AuthInputError> {
        let mut out = AuthTokens::default();
        let Some(good) = self.good()? else {
            return Ok(out);
        };
        // An opaque token (checked by introspection, say) has no header or signature to alter.
        if let (Ok(none), Ok(broken)) = (alg_none(&good), bad_signature(&good)) {
            out.push(TokenKind::AlgNone, none);
            out.push(TokenKind::BadSignature, broken);
        }
        out.push(TokenKind::Good, good);
        if let Some((issuer, aud)) = &self.issuer {
            let base = self.claims(issuer, aud);
            let t = now();
            let expired = Claims {
                iat: t - 7200,
                nbf: t - 7200,
                exp: t - 3600,
                ..base.clone()
            };
            let early = Claims {
                iat: t,
                nbf: t + 3600,
                exp: t + 7200,
                ..base.clone()
            };
            let other_aud = Claims {
                aud: format!("{aud}-another-resource"),
                ..base.clone()
            };
            let other_iss = Claims {
                iss: format!("{}/another-issuer", issuer.issuer.trim_end_matches('/')),
                ..base.clone()
            };
            out.push(TokenKind::Expired, issuer.mint(&expired)?);
            out.push(TokenKind::NotYetValid, issuer.mint(&early)?);
            out.push(TokenKind::WrongAudience, issuer.mint(&other_aud)?);
            out.push(TokenKind::WrongIssuer, issuer.mint(&other_iss)?);
            out.push(
                TokenKind::HmacPublicKey,
                issuer.mint_hmac_with_public_key(&base)?,
            );
            let other_subject = Claims {
                sub: "gauntlet-another-user".into(),
                ..base.clone()
            };
            out.push(TokenKind::OtherSubject, issuer.mint(&other_subject)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_read_back_from_pem_signs_what_its_jwks_verifies() {
        let made = Issuer::generate("https://issuer.test", "k").unwrap();
        let read = Issuer::from_pem("https://issuer.test", "k", &made.private_pem()).unwrap();
        assert_eq!(made.jwks(), read.jwks());
        let token = read.mint(&read.claims("https://r.test/mcp", "")).unwrap();
        let jwk: jsonwebtoken::jwk::JwkSet = serde_json::from_str(&made.jwks()).unwrap();
        let key = jsonwebtoken::DecodingKey::from_jwk(&jwk.keys[0]).unwrap();
        let mut v = jsonwebtoken::Validation::new(Algorithm::ES256);
        v.set_audience(&["https://r.test/mcp"]);
        jsonwebtoken::decode::<serde_json::Value>(&token, &key, &v).unwrap();
    }
}
