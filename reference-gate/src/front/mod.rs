//! The gate's fronts: Streamable HTTP and stdio. Each enforces its transport's rules itself and
//! hands canonical messages to the proxy.

pub mod http;
pub mod sessions;
pub mod stdio;
