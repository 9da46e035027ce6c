//! The reference authorization gate: authorize-before-forward for MCP (see DESIGN.md section 5).
//!
//! Not built yet: the runner, witness and server-profile catalogue come first (issue 2); the
//! gate's canonical parser, policy engine, proxy and fronts arrive with the gate issue (issue 3).
