//! Deliberate defects, for proving that the suite's gate cases catch broken gates.
//!
//! With the `faults` cargo feature (the suite's tests only), [`Faults`] and [`Leniency`] are
//! structs of switches that [`crate::proxy::Proxy::with_faults`] turns on. Without it — every
//! deployable build — they are zero-sized types whose switches are constant `false`: the branches
//! that ask them are dead code the compiler removes, and whatever only a fault reaches (the
//! setters, the lenient parser's repair pass, the batch forwarder, the forward-token headers, the
//! auth faults) is not compiled at all. Nothing in a configuration can turn a fault on.

/// One accessor per switch: with the feature it reads the field, without it it is `false`.
macro_rules! accessors {
    ($name:ident: $($field:ident),* $(,)?) => {
        #[cfg(feature = "faults")]
        impl $name {
            $(
                #[inline]
                pub(crate) const fn $field(&self) -> bool {
                    self.$field
                }
            )*
        }

        #[cfg(not(feature = "faults"))]
        impl $name {
            $(
                #[inline(always)]
                pub(crate) const fn $field(&self) -> bool {
                    false
                }
            )*
        }
    };
}

/// Ways of reading more loosely than a gate may: each one a defect real gates have. Only the
/// fault-injection parser (`canonical::parse_leniently`) takes them.
#[cfg(feature = "faults")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Leniency {
    /// A duplicate member replaces the earlier one.
    pub last_duplicate_wins: bool,
    /// Any string is a tool name.
    pub any_tool_name: bool,
    /// Envelope rules relaxed: any id type (a null id makes a notification), unknown and
    /// look-alike members ignored, non-object params dropped.
    pub lax_envelope: bool,
    /// Invalid UTF-8 and lone surrogates replaced, a BOM skipped, comments and trailing commas
    /// skipped, raw control characters kept.
    pub lenient_grammar: bool,
    /// Only the first JSON value counts; whatever follows is ignored.
    pub first_value_only: bool,
}

/// Without the feature the parser has one reading, the strict one.
#[cfg(not(feature = "faults"))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Leniency;

accessors!(Leniency: last_duplicate_wins, any_tool_name, lax_envelope, lenient_grammar, first_value_only);

impl Leniency {
    /// The strict reading: every switch off.
    #[cfg(feature = "faults")]
    pub(crate) const STRICT: Leniency = Leniency {
        last_duplicate_wins: false,
        any_tool_name: false,
        lax_envelope: false,
        lenient_grammar: false,
        first_value_only: false,
    };
    #[cfg(not(feature = "faults"))]
    pub(crate) const STRICT: Leniency = Leniency;
}

/// The proxy's and the fronts' defects.
#[cfg(feature = "faults")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// Forward the client's raw bytes instead of the canonical bytes.
    pub forward_raw: bool,
    /// Accept duplicate member names; the last one wins.
    pub last_duplicate_wins: bool,
    /// Forward each element of a batch array without asking the policy.
    pub batch_skips_policy: bool,
    /// Put the engine's error text in the denial message.
    pub leak_engine_text: bool,
    /// Allow when the engine fails.
    pub allow_on_engine_error: bool,
    /// Relay whatever the downstream answered, unvalidated.
    pub relay_downstream_verbatim: bool,
    /// Read messages loosely.
    pub leniency: Leniency,
    /// HTTP front: any Content-Type is taken as JSON.
    pub any_media_type: bool,
    /// HTTP front: no body size limit.
    pub no_size_limit: bool,
    /// HTTP front: modern requests' headers are not compared with their bodies.
    pub skip_binding: bool,
    /// Only tool calls are policed: every other method goes through undecided.
    pub unpoliced_methods: bool,
    /// Resource rules are matched against the URI as the client spelled it, and that spelling
    /// is forwarded (no normalization).
    pub raw_uri_match: bool,
    /// Server-to-client requests are relayed whatever the policy says.
    pub relay_server_requests: bool,
    /// A client's response is forwarded under whatever id it names, outstanding or not.
    pub any_response_id: bool,
    /// HTTP front: the checks hang on the request target as written (`/mcp` exactly) while the
    /// router serves every spelling of the endpoint (`/mcp/`, `/MCP`, `//mcp`, `/mcp;x`,
    /// `/mcp?x=1`): those POSTs go to the downstream as they came, unchecked and unpoliced.
    pub unpoliced_routes: bool,
    /// HTTP front: a body with a `Content-Encoding` is not inspected (it does not parse as it
    /// came) but goes to the downstream as it came, coding header and all, for a downstream that
    /// decodes it to read and run.
    pub unpoliced_codings: bool,
}

/// Without the feature: no defect at all, as constants.
#[cfg(not(feature = "faults"))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Faults;

accessors!(Faults:
    forward_raw,
    leak_engine_text,
    allow_on_engine_error,
    relay_downstream_verbatim,
    any_media_type,
    no_size_limit,
    skip_binding,
    unpoliced_methods,
    raw_uri_match,
    relay_server_requests,
    any_response_id,
);

impl Faults {
    /// A correct proxy: no defect.
    #[cfg(feature = "faults")]
    pub(crate) const NONE: Faults = Faults {
        forward_raw: false,
        last_duplicate_wins: false,
        batch_skips_policy: false,
        leak_engine_text: false,
        allow_on_engine_error: false,
        relay_downstream_verbatim: false,
        leniency: Leniency::STRICT,
        any_media_type: false,
        no_size_limit: false,
        skip_binding: false,
        unpoliced_methods: false,
        raw_uri_match: false,
        relay_server_requests: false,
        any_response_id: false,
        unpoliced_routes: false,
        unpoliced_codings: false,
    };
    #[cfg(not(feature = "faults"))]
    pub(crate) const NONE: Faults = Faults;

    /// How loosely the proxy reads: the parser's switches plus `last_duplicate_wins`.
    #[cfg(feature = "faults")]
    pub(crate) const fn leniency(&self) -> Leniency {
        let mut l = self.leniency;
        l.last_duplicate_wins |= self.last_duplicate_wins;
        l
    }

    #[cfg(not(feature = "faults"))]
    #[inline(always)]
    pub(crate) const fn leniency(&self) -> Leniency {
        Leniency
    }
}

/// Printed to stderr when a proxy is given any defect, so a gate with faults never passes for a
/// real one unnoticed; also the marker the suite's build test looks for in binaries.
#[cfg(feature = "faults")]
pub const FAULTS_MARKER: &str =
    "reference-gate: FAULT INJECTION ENABLED (test build, feature `faults`)";
