//! A lane's identity, a leaf: who a lane is (profile, transport, the witness personality behind a
//! gate, the version it speaks) and its name as every output shows it. Made by `target`, kept by
//! each record, read by every report.

use crate::case::{Profile, TransportKind};
use crate::versions::Version;

/// Who a lane is: the profile it is judged by, its transport, the personality of the witness
/// behind a gate (when not strict) and the version its cases speak, part of its name when the
/// run has lanes for several. Owned by the lane; a record is made from it, and every output
/// names the lane by it (`Display`: its [`LaneName`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneId {
    pub profile: Profile,
    pub transport: TransportKind,
    pub downstream: Option<&'static str>,
    pub version: Version,
    pub version_in_name: bool,
}

impl LaneId {
    /// A lane of the strict witness (or a target of its own) at the newest legacy version,
    /// named without it.
    pub fn new(transport: TransportKind, profile: Profile) -> LaneId {
        LaneId {
            profile,
            transport,
            downstream: None,
            version: crate::versions::NEWEST_LEGACY,
            version_in_name: false,
        }
    }
}

impl std::fmt::Display for LaneId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let version = self.version.to_string();
        LaneName {
            profile: self.profile,
            transport: self.transport,
            downstream: self.downstream,
            version: self.version_in_name.then_some(version.as_str()),
        }
        .fmt(f)
    }
}

/// A lane's name, as libtest, JUnit, the matrix and stderr show it: `http`, `gate/stdio`,
/// `gate/http@first-wins`, `http 2025-06-18` (in a run over several versions)…
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaneName<'a> {
    pub profile: Profile,
    pub transport: TransportKind,
    /// The personality of the witness behind a gate, when not strict.
    pub downstream: Option<&'a str>,
    /// The version, when the run has lanes for several.
    pub version: Option<&'a str>,
}

impl std::fmt::Display for LaneName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.profile == Profile::Gate {
            f.write_str("gate/")?;
        }
        f.write_str(self.transport.as_str())?;
        if let Some(d) = self.downstream {
            write!(f, "@{d}")?;
        }
        if let Some(v) = self.version {
            write!(f, " {v}")?;
        }
        Ok(())
    }
}
