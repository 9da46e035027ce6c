//! How a call of a downstream tool is spelled through a gate that renames tools or wraps them in
//! a meta-tool (`--tool-name`, `--meta-tool`): the runner writes the cases' tool calls in the
//! gate's spelling, and reads a call back to know which downstream tool it names. The witness
//! behind the gate, and so every oracle of what reached it, keeps the tools' own names.
//!
//! A leaf beside the case model: it knows JSON values, case files and how servers read JSON
//! (`reading`), nothing of transports or verdicts.

use crate::case::{BodySpec, CaseSpec, MappingNeed, RequestSpec};
use serde_json::{Map, Value};
use std::borrow::Cow;
use text::MetaText;

mod text;

/// A mapping given on the command line that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MappingError {
    #[error("the tool name template `{0}` must hold `{{tool}}` exactly once")]
    NameTemplate(String),
    #[error("the prompt name template `{0}` must hold `{{prompt}}` exactly once")]
    PromptTemplate(String),
    #[error("the meta-tool arguments template is not a JSON object")]
    NotAnObject,
    #[error("the meta-tool arguments template must have exactly one top-level member whose value is \"{{tool}}\", and exactly one whose value is \"{{arguments}}\"")]
    Members,
}

/// A gate's spelling of tool calls. The default spells every tool by its own name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallMapping {
    /// The name the client calls for downstream tool `{tool}` (`lab_{tool}`,
    /// `{server}__{tool}`); `None`: the tool's own name.
    name: Option<String>,
    /// `{server}` in the templates.
    server: String,
    /// A meta-tool every call goes through.
    meta: Option<MetaTool>,
    /// The name the client asks for downstream prompt `{prompt}` by; `None`: its own name.
    prompt: Option<String>,
}

/// A meta-tool (`execute_tool`) whose arguments name the tool and carry its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaTool {
    name: String,
    /// The meta-tool's arguments: the template's members in order, the strings `"{tool}"`,
    /// `"{arguments}"` standing for the call's, and `{server}` replaced in every other string.
    template: Map<String, Value>,
    /// The member that names the tool.
    tool_key: String,
    /// The member that carries the tool's arguments.
    arguments_key: String,
}

const TOOL: &str = "{tool}";
const PROMPT: &str = "{prompt}";
const ARGUMENTS: &str = "{arguments}";
const SERVER: &str = "{server}";

impl CallMapping {
    /// A mapping: the name template (`None` or `{tool}`: names as they are), the `{server}`
    /// value, and a meta-tool's name with its arguments template (a JSON object, e.g.
    /// `{"server": "{server}", "tool": "{tool}", "arguments": "{arguments}"}`).
    pub fn new(
        name: Option<&str>,
        server: &str,
        meta: Option<(&str, &str)>,
    ) -> Result<CallMapping, MappingError> {
        let name = match name {
            Some(t) if t.matches(TOOL).count() != 1 => {
                return Err(MappingError::NameTemplate(t.to_string()))
            }
            Some(TOOL) | None => None,
            Some(t) => Some(t.to_string()),
        };
        let meta = match meta {
            None => None,
            Some((tool, template)) => Some(MetaTool::new(tool, template, server)?),
        };
        // A gate that namespaces its tools namespaces its prompts the same way, unless told
        // otherwise (`with_prompt_name`).
        let prompt = name.as_ref().map(|t| t.replacen(TOOL, PROMPT, 1));
        Ok(CallMapping {
            name,
            server: server.to_string(),
            meta,
            prompt,
        })
    }

    /// The same mapping with prompts named by `template` (`{prompt}`, `{server}`; `{prompt}`
    /// alone: prompts keep their own names); `None` keeps the tool name template's spelling.
    pub fn with_prompt_name(mut self, template: Option<&str>) -> Result<CallMapping, MappingError> {
        match template {
            None => {}
            Some(t) if t.matches(PROMPT).count() != 1 => {
                return Err(MappingError::PromptTemplate(t.to_string()))
            }
            Some(PROMPT) => self.prompt = None,
            Some(t) => self.prompt = Some(t.to_string()),
        }
        Ok(self)
    }

    /// How this mapping spells calls, in words (`None`: every name as it is).
    pub(crate) fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(t) = &self.name {
            parts.push(format!("tools named `{}`", t.replace(SERVER, &self.server)));
        }
        if let Some(m) = &self.meta {
            parts.push(format!(
                "every call through the meta-tool `{}` (tool in `{}`, arguments in `{}`)",
                m.name, m.tool_key, m.arguments_key
            ));
        }
        if let Some(p) = &self.prompt {
            parts.push(format!(
                "prompts named `{}`",
                p.replace(SERVER, &self.server)
            ));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// The name the gate knows downstream prompt `prompt` by.
    pub(crate) fn spelled_prompt(&self, prompt: &str) -> String {
        match &self.prompt {
            None => prompt.to_string(),
            Some(t) => t.replace(SERVER, &self.server).replacen(PROMPT, prompt, 1),
        }
    }

    /// Every tool is called by its own name.
    pub(crate) fn is_direct(&self) -> bool {
        self.name.is_none() && self.meta.is_none()
    }

    pub fn meta(&self) -> Option<&MetaTool> {
        self.meta.as_ref()
    }

    /// The name the gate knows downstream tool `tool` by (inside the meta-tool's arguments,
    /// when there is one).
    pub fn spelled(&self, tool: &str) -> String {
        match &self.name {
            None => tool.to_string(),
            Some(t) => t.replace(SERVER, &self.server).replacen(TOOL, tool, 1),
        }
    }

    /// The downstream tool a spelled name stands for, if it is one.
    fn unspelled(&self, spelled: &str) -> Option<String> {
        let Some(t) = &self.name else {
            return Some(spelled.to_string());
        };
        let (before, after) = t.split_once(TOOL)?;
        let before = before.replace(SERVER, &self.server);
        let after = after.replace(SERVER, &self.server);
        let tool = spelled.strip_prefix(&before)?.strip_suffix(&after)?;
        (!tool.is_empty()).then(|| tool.to_string())
    }

    /// A call of `tool` with `arguments` as the gate takes it: the name called, and its
    /// arguments.
    pub fn call(&self, tool: &str, arguments: Value) -> (String, Value) {
        let spelled = self.spelled(tool);
        match &self.meta {
            None => (spelled, arguments),
            Some(m) => (m.name.clone(), m.arguments(&spelled, arguments)),
        }
    }

    /// Rewrite every `tools/call` in `message` (one message or a batch) into the gate's
    /// spelling, whatever tool it names; its other members (`_meta`) stay where they are.
    pub(crate) fn rewrite(&self, message: &mut Value) {
        if self.is_direct() {
            return;
        }
        match message {
            Value::Array(items) => items.iter_mut().for_each(|m| self.rewrite(m)),
            Value::Object(m) => {
                if m.get("method").and_then(Value::as_str) != Some("tools/call") {
                    return;
                }
                let Some(Value::Object(params)) = m.get_mut("params") else {
                    return;
                };
                let Some(tool) = params.get("name").and_then(Value::as_str) else {
                    return;
                };
                let tool = tool.to_string();
                let arguments = params
                    .get("arguments")
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Map::new()));
                let (name, arguments) = self.call(&tool, arguments);
                params.insert("name".into(), Value::String(name));
                params.insert("arguments".into(), arguments);
            }
            _ => {}
        }
    }

    /// The downstream tool a `tools/call`'s `params` name through the gate, if any.
    pub(crate) fn called_tool(&self, params: &Value) -> Option<String> {
        let name = params.get("name").and_then(Value::as_str)?;
        match &self.meta {
            None => self.unspelled(name),
            Some(m) if name == m.name => {
                let inner = params
                    .get("arguments")
                    .and_then(|a| a.get(&m.tool_key))
                    .and_then(Value::as_str)?;
                self.unspelled(inner)
            }
            Some(_) => None,
        }
    }
}

/// Stand-ins for the tool-name placeholders while the runner reads a case's text for the
/// names it calls (private-use characters: no case spells them).
const SPELLED: [(&str, &str); 3] = [
    ("{{denied_tool}}", "\u{e000}denied"),
    ("{{allowed_tool}}", "\u{e000}allowed"),
    ("{{denied_tool_escaped}}", "\u{e000}escaped"),
];

/// Tool names of the witness that a case's text may spell without a placeholder (escaped
/// spellings of the denied name keep "everything").
const LITERAL_TOOLS: [&str; 4] = ["everything", "fault_", "\"echo\"", "\"add\""];

impl CallMapping {
    /// Whether the runner can send `case` through this mapping: every tool call in it is one it
    /// can spell. A JSON body is rewritten whatever tools it names; a body that is text (or
    /// raw bytes, or a repeated unit) is sent as written, so through a renaming gate its calls
    /// must name the tools by placeholder; through a meta-tool each call must be one the text
    /// lets the runner write into the meta-tool's arguments ([`text`]). A raw HTTP request is
    /// never rewritten (its framing counts the bytes), so through either it must make no call.
    /// A case written for meta-tools (`"mapping": "meta-tool"`) applies only under one. Any
    /// other case's trials are not applicable.
    pub(crate) fn can_send(&self, case: &CaseSpec) -> bool {
        if case.mapping == Some(MappingNeed::MetaTool) {
            return self.meta.is_some();
        }
        if self.is_direct() {
            return true;
        }
        // A series' baseline request is sent through the mapping too.
        let baseline = case
            .series
            .as_ref()
            .and_then(|s| s.baseline.as_deref())
            .is_none_or(|b| self.can_send_request(b));
        baseline && self.can_send_request(&case.request)
    }

    fn can_send_request(&self, request: &RequestSpec) -> bool {
        if let Some(raw) = &request.raw_http {
            return !raw.contains("tools/call");
        }
        let Some(body) = request.body.as_ref() else {
            return true;
        };
        if matches!(body, BodySpec::Json(_)) {
            return true;
        }
        let Some(meta) = &self.meta else {
            return readable_texts(body).iter().all(|t| self.can_send_text(t));
        };
        match text::wrap_calls(body) {
            MetaText::Unchanged => readable_texts(body).iter().all(|t| {
                !mentions_call(&stand_ins(t)) && calls_in(stand_ins(t).as_bytes()).is_empty()
            }),
            // Every call that some reading finds in the text as written names its tool by
            // placeholder (no literal name hides beside a rewritten pair), and every call read
            // in the rewritten text goes through the meta-tool.
            MetaText::Rewritten(wrapped) => {
                readable_texts(body).iter().all(|t| self.can_send_text(t))
                    && readable_texts(&wrapped)
                        .iter()
                        .all(|t| meta.wraps_every_call(&stand_ins(t)))
            }
            MetaText::Cannot => false,
        }
    }

    /// The body the runner sends for `spec`: through a meta-tool, a text body's calls written
    /// into its arguments where the text allows it (placeholders still to replace).
    pub(crate) fn text_body<'a>(&self, spec: &'a BodySpec) -> Cow<'a, BodySpec> {
        match (&self.meta, text::wrap_calls(spec)) {
            (Some(_), MetaText::Rewritten(wrapped)) => Cow::Owned(wrapped),
            _ => Cow::Borrowed(spec),
        }
    }

    /// A text body's calls, read every way a server may read them (`text` with the tool
    /// placeholders stood in for): each names its tool by placeholder (a renaming gate).
    fn can_send_text(&self, text: &str) -> bool {
        let text = stand_ins(text);
        let calls = calls_in(text.as_bytes());
        // Text no reader takes as JSON may still hold a call a careless server finds.
        let literal = (mentions_call(&text) || !calls.is_empty())
            && LITERAL_TOOLS.iter().any(|t| text.contains(t));
        !literal
            && calls
                .iter()
                .all(|name| name.as_deref().is_some_and(|n| n.contains('\u{e000}')))
    }
}

/// The texts a body may be read as: its bytes, and for raw bytes their UTF-16 readings too;
/// a repeated unit or a nest once.
fn readable_texts(body: &BodySpec) -> Vec<String> {
    let texts: Vec<Vec<u8>> = match body {
        BodySpec::Json(v) => vec![v.to_string().into_bytes()],
        BodySpec::Text(t) => vec![t.clone().into_bytes()],
        BodySpec::Base64(b) => {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b)
                .unwrap_or_default();
            let utf16 = |le: bool| -> Vec<u8> {
                let units: Vec<u16> = bytes
                    .chunks_exact(2)
                    .map(|p| {
                        if le {
                            u16::from_le_bytes([p[0], p[1]])
                        } else {
                            u16::from_be_bytes([p[0], p[1]])
                        }
                    })
                    .collect();
                String::from_utf16_lossy(&units).into_bytes()
            };
            vec![utf16(true), utf16(false), bytes.clone()]
        }
        BodySpec::Repeat(r) => vec![format!("{}{}{}", r.prefix, r.unit, r.suffix).into_bytes()],
        BodySpec::Nest(n) => {
            vec![format!("{}{}{}{}{}", n.prefix, n.open, n.inner, n.close, n.suffix).into_bytes()]
        }
    };
    texts
        .iter()
        .map(|t| String::from_utf8_lossy(t).into_owned())
        .collect()
}

/// `text` with the tool placeholders stood in for (private-use characters) and `{{meta}}` an
/// empty object, so that readers can read it.
fn stand_ins(text: &str) -> String {
    let mut text = text.to_string();
    for (placeholder, stand_in) in SPELLED {
        text = text.replace(placeholder, stand_in);
    }
    text.replace("{{meta}}", "{}")
}

/// Whether `text` spells the `tools/call` method (its `/` escaped or not).
fn mentions_call(text: &str) -> bool {
    text.contains("tools/call") || text.contains("tools\\/call")
}

/// The tool names (`None`: not a string) of every `tools/call` that some reading of `bytes`
/// finds, over the whole text and over each line.
fn calls_in(bytes: &[u8]) -> Vec<Option<String>> {
    let mut names = Vec::new();
    crate::reading::each_message_read(bytes, |m| {
        if m.get("method").and_then(Value::as_str) == Some("tools/call") {
            names.push(
                m.pointer("/params/name")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            );
        }
    });
    names
}

impl MetaTool {
    fn new(name: &str, template: &str, server: &str) -> Result<MetaTool, MappingError> {
        let Ok(Value::Object(members)) = serde_json::from_str::<Value>(template) else {
            return Err(MappingError::NotAnObject);
        };
        let key_of = |want: &str| -> Result<String, MappingError> {
            let keys: Vec<&String> = members
                .iter()
                .filter(|(_, v)| v.as_str() == Some(want))
                .map(|(k, _)| k)
                .collect();
            match keys[..] {
                [k] => Ok(k.clone()),
                _ => Err(MappingError::Members),
            }
        };
        let (tool_key, arguments_key) = (key_of(TOOL)?, key_of(ARGUMENTS)?);
        let template = members
            .into_iter()
            .map(|(k, v)| (k, with_server(v, server)))
            .collect();
        Ok(MetaTool {
            name: name.to_string(),
            template,
            tool_key,
            arguments_key,
        })
    }

    /// The meta-tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The member of its arguments that names the tool.
    pub(crate) fn tool_key(&self) -> &str {
        &self.tool_key
    }

    /// The member of its arguments that carries the tool's arguments.
    pub(crate) fn arguments_key(&self) -> &str {
        &self.arguments_key
    }

    /// The opening of its arguments object as JSON text, up to where the tool's member goes:
    /// `{` and the template's fixed members, each followed by a comma
    /// (`{"server":"lab",`). A case written for meta-tools spells the rest itself.
    pub(crate) fn arguments_opening(&self) -> String {
        let mut out = String::from("{");
        for (k, v) in &self.template {
            if *k == self.tool_key || *k == self.arguments_key {
                continue;
            }
            // Serializing a string and a Value cannot fail.
            out.push_str(&serde_json::to_string(k).expect("a string serializes"));
            out.push(':');
            out.push_str(&serde_json::to_string(v).expect("a JSON value serializes"));
            out.push(',');
        }
        out
    }

    /// Whether every `tools/call` that some reading of `text` (a body rewritten by [`text`],
    /// tool placeholders stood in for) finds goes through this meta-tool and names its tool by
    /// placeholder.
    fn wraps_every_call(&self, text: &str) -> bool {
        let text = text
            .replace("{{meta_tool}}", &self.name)
            .replace("{{meta_tool_key}}", &self.tool_key)
            .replace("{{meta_arguments_key}}", &self.arguments_key)
            .replace("{{meta_arguments_open}}", &self.arguments_opening());
        let mut every = true;
        crate::reading::each_message_read(text.as_bytes(), |m| {
            if m.get("method").and_then(Value::as_str) != Some("tools/call") {
                return;
            }
            let through = m.pointer("/params/name").and_then(Value::as_str) == Some(&self.name);
            let named = m
                .pointer("/params/arguments")
                .and_then(|a| a.get(&self.tool_key))
                .and_then(Value::as_str)
                .is_some_and(|n| n.contains('\u{e000}'));
            every &= through && named;
        });
        every
    }

    fn arguments(&self, tool: &str, arguments: Value) -> Value {
        let members = self
            .template
            .iter()
            .map(|(k, v)| {
                let v = if *k == self.tool_key {
                    Value::String(tool.to_string())
                } else if *k == self.arguments_key {
                    arguments.clone()
                } else {
                    v.clone()
                };
                (k.clone(), v)
            })
            .collect();
        Value::Object(members)
    }
}

/// `value` with `{server}` replaced in every string of it.
fn with_server(value: Value, server: &str) -> Value {
    match value {
        Value::String(s) => Value::String(s.replace(SERVER, server)),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| with_server(v, server)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (k, with_server(v, server)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_spelled_and_read_back() {
        let m = CallMapping::new(Some("{server}__{tool}"), "lab", None).unwrap();
        assert_eq!(m.spelled("echo"), "lab__echo");
        assert_eq!(m.spelled_prompt("leak_secrets"), "lab__leak_secrets");
        let own = m.clone().with_prompt_name(Some("{prompt}")).unwrap();
        assert_eq!(own.spelled_prompt("leak_secrets"), "leak_secrets");
        let other = m
            .clone()
            .with_prompt_name(Some("p-{prompt}-{server}"))
            .unwrap();
        assert_eq!(other.spelled_prompt("x"), "p-x-lab");
        assert!(m.clone().with_prompt_name(Some("{tool}")).is_err());
        assert_eq!(CallMapping::default().spelled_prompt("x"), "x");
        let call = json!({"name": "lab__delete_everything", "arguments": {}});
        assert_eq!(m.called_tool(&call).as_deref(), Some("delete_everything"));
        assert_eq!(m.called_tool(&json!({"name": "delete_everything"})), None);
        assert_eq!(m.called_tool(&json!({"name": "lab__"})), None);
        assert!(CallMapping::new(Some("{tool}"), "", None)
            .unwrap()
            .is_direct());
        assert_eq!(
            CallMapping::new(Some("lab"), "", None),
            Err(MappingError::NameTemplate("lab".into()))
        );
        assert!(CallMapping::new(Some("{tool}{tool}"), "", None).is_err());
    }

    #[test]
    fn a_meta_tool_wraps_every_call_and_keeps_the_rest_of_params() {
        let template = r#"{"server": "{server}", "tool": "{tool}", "args": "{arguments}"}"#;
        let m =
            CallMapping::new(Some("x_{tool}"), "lab", Some(("execute_tool", template))).unwrap();
        let mut batch = json!([
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"_meta": {"k": 1}, "name": "echo", "arguments": {"text": "hi"}}},
            {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        ]);
        m.rewrite(&mut batch);
        assert_eq!(
            batch[0]["params"],
            json!({"_meta": {"k": 1}, "name": "execute_tool",
                   "arguments": {"server": "lab", "tool": "x_echo", "args": {"text": "hi"}}})
        );
        assert_eq!(
            batch[1],
            json!({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        );
        assert_eq!(m.called_tool(&batch[0]["params"]).as_deref(), Some("echo"));
        // A call of another tool by its own name is not a call through the meta-tool.
        assert_eq!(m.called_tool(&json!({"name": "x_echo"})), None);
        let meta = m.meta().unwrap();
        assert_eq!(meta.arguments_opening(), r#"{"server":"lab","#);
        assert_eq!((meta.tool_key(), meta.arguments_key()), ("tool", "args"));
        for bad in [
            r#"{"tool": "{tool}"}"#,
            r#"["{tool}"]"#,
            r#"{"a": "{tool}", "b": "{tool}", "c": "{arguments}"}"#,
        ] {
            assert!(
                CallMapping::new(None, "", Some(("m", bad))).is_err(),
                "{bad}"
            );
        }
    }
}
