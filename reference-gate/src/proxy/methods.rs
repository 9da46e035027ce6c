//! One handler per method family, behind [`Proxy::dispatch`]. Each reads one request's facts
//! from a [`Request`] and decides through its methods only, so a reviewer reads one method's
//! path through the policy in one short function.

use super::request::Request;
use super::{error_bytes, result_bytes, Answer, Handled, Proxy};
use crate::canonical::{Canonical, Json, Message};
use crate::policy::ActionKind;
use crate::relay;

/// The methods the gate answers or decides itself; the `unpoliced_methods` fault forwards every
/// other one unjudged.
const GATE_OWNED: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/call",
    "tools/list",
];

impl Proxy {
    /// The request's handler, by its method and era.
    pub(super) async fn dispatch(&self, r: &Request<'_>) -> Answer {
        if self.faults.unpoliced_methods() && !GATE_OWNED.contains(&r.method) {
            return r.forward_as_sent().await;
        }
        match r.method {
            "initialize" if r.modern => r.unknown(),
            "initialize" => self.initialize(r),
            "server/discover" if r.modern => self.discover(r),
            // 2026-07-28 removed `ping` along with the handshake.
            "ping" if r.modern => r.unknown(),
            "ping" => r.answer(result_bytes(r.id, "{}"), Handled::Local),
            "tools/call" => self.tools_call(r).await,
            // Lists: forwarded, and filtered by the same rules that decide a use.
            "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
                r.forward_as_sent().await
            }
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                self.resource(r).await
            }
            "prompts/get" => match r.c.message().param("name").and_then(Json::as_str) {
                Some(name) if r.allows(ActionKind::Prompt, name) => r.forward_as_sent().await,
                Some(_) => r.denied(),
                None => r.bad_params(),
            },
            "completion/complete" => self.completion(r).await,
            // Any other method (logging/setLevel, tasks, extensions): only when a rule allows
            // it by name; else it does not exist here (GATE-METH-01).
            other if r.allows(ActionKind::Method, other) => r.forward_as_sent().await,
            _ => r.unknown(),
        }
    }

    /// A legacy `initialize`, answered by the gate: the version asked for when the gate speaks
    /// it, else its newest legacy version; a modern-only gate names what it speaks.
    fn initialize(&self, r: &Request<'_>) -> Answer {
        let requested = match r.c.message() {
            Message::Request {
                params: Some(p), ..
            } => p
                .iter()
                .find(|(k, _)| k == "protocolVersion")
                .and_then(|(_, v)| v.as_str().map(str::to_string)),
            _ => None,
        };
        let Some(requested) = requested else {
            return r.answer(
                error_bytes(Some(r.id), -32602, "Invalid params"),
                Handled::Local,
            );
        };
        let newest_legacy = self.versions.iter().filter(|v| !v.is_modern()).max();
        let Some(newest_legacy) = newest_legacy else {
            return r.answer(
                self.unsupported(Some(r.id), Some(&requested)),
                Handled::Refused,
            );
        };
        let version = self.legacy_named(&requested).unwrap_or(*newest_legacy);
        let answer = format!(
            r#"{{"protocolVersion":"{version}","capabilities":{{"tools":{{"listChanged":false}}}},"serverInfo":{{"name":"reference-gate","version":"{}"}}}}"#,
            env!("CARGO_PKG_VERSION")
        );
        let mut a = r.answer(result_bytes(r.id, &answer), Handled::Local);
        if let Answer::Done(p) = &mut a {
            p.negotiated = Some(version);
        }
        a
    }

    /// A modern `server/discover`, answered by the gate with the versions it speaks.
    fn discover(&self, r: &Request<'_>) -> Answer {
        let answer = serde_json::json!({
            "resultType": "complete",
            "supportedVersions": self.versions,
            "capabilities": {"tools": {"listChanged": false}},
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo":
                {"name": "reference-gate", "version": env!("CARGO_PKG_VERSION")}}
        });
        r.answer(result_bytes(r.id, &answer.to_string()), Handled::Local)
    }

    /// `resources/read`, `subscribe`, `unsubscribe`: one spelling of the URI is judged, and
    /// that spelling is what goes downstream.
    async fn resource(&self, r: &Request<'_>) -> Answer {
        let Some(uri) = r.c.message().param("uri").and_then(Json::as_str) else {
            return r.bad_params();
        };
        if self.faults.raw_uri_match() {
            // The fault: the client's spelling judged and forwarded.
            if !r.allows(ActionKind::Resource, uri) {
                return r.denied();
            }
            return r.forward_as_sent().await;
        }
        let Some(uri) = crate::uri::normalize(uri) else {
            return r.bad_params();
        };
        if !r.allows(ActionKind::Resource, &uri) {
            return r.denied();
        }
        let params = r.c.message().params().map(Vec::as_slice).unwrap_or(&[]);
        let params = relay::replace_param(params, "uri", Json::String(uri));
        let bytes = Canonical::new(Message::Request {
            id: r.id.clone(),
            method: r.method.to_string(),
            params: Some(params),
        });
        r.forward(bytes.forwarding_bytes().to_vec()).await
    }

    /// `completion/complete`: completing reveals what a prompt or resource takes, so the same
    /// rule as using it decides, and the method must be allowed too.
    async fn completion(&self, r: &Request<'_>) -> Answer {
        let reference = r.c.message().param("ref");
        let kind = reference.and_then(|x| x.get("type")).and_then(Json::as_str);
        let subject = match kind {
            Some("ref/prompt") => reference
                .and_then(|x| x.get("name"))
                .and_then(Json::as_str)
                .map(|n| (ActionKind::Prompt, n.to_string())),
            // The same one spelling of the URI as a read (a template's braces stay).
            Some("ref/resource") => reference
                .and_then(|x| x.get("uri"))
                .and_then(Json::as_str)
                .and_then(crate::uri::normalize)
                .map(|u| (ActionKind::Resource, u)),
            _ => None,
        };
        match subject {
            Some((k, s)) if r.allows(k, &s) && r.allows(ActionKind::Method, r.method) => {
                r.forward_as_sent().await
            }
            Some(_) => r.denied(),
            None => r.bad_params(),
        }
    }
}
