//! The canary: the denied tool every catalogue case tries to reach, and the text it answers when
//! it runs. A leaf: the witness serves them, the transport and the verdict look for them, the
//! CLI's defaults name them.

/// The canary tool.
pub const CANARY_TOOL: &str = "delete_everything";
/// The prompt no rule allows (the witness serves a secret in it).
pub(crate) const DENIED_PROMPT: &str = "leak_secrets";
/// What the canary answers, so a response shows it ran.
pub const CANARY_MARKER: &str = "CANARY-EXECUTED";
