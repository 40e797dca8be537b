//! What the tool policy took away ([`Removed`]) and the layer that did it ([`Layer`]); the
//! policy itself (which tools an agent is offered) is `agent::tools`.

use std::fmt;

/// The policy layer that removed a tool, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// Not in the agent's `tools.profile` (nor added by `tools.allow`).
    Profile,
    /// Removed by the agent's `tools.deny`.
    Deny,
    /// Its backend is not configured, or it is not built into this binary.
    Availability,
    /// Removed by `[channels.<name>] deny_tools` for the channel the run came from.
    Channel,
}

impl Layer {
    /// The name printed by `clawbus tools` (`profile`, `deny`, `availability`, `channel`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Profile => "profile",
            Self::Deny => "deny",
            Self::Availability => "availability",
            Self::Channel => "channel",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool the policy took away, with the layer that did it and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Removed {
    /// The tool name.
    pub tool: String,
    /// The first layer that removed it.
    pub layer: Layer,
    /// Why, naming the setting (`tools.deny entry "group:runtime"`).
    pub reason: String,
}
