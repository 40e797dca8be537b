//! The gateway's timezone (`[gateway] timezone`): the default of cron schedules and heartbeats
//! that name none. Never silently UTC: when the file names none it is the `TZ` environment
//! variable if that names a valid zone, else the system's (`/etc/timezone`, or the target of the
//! `/etc/localtime` link), else UTC with a logged warning saying so.

use chrono_tz::Tz;
use std::sync::OnceLock;

/// Parses an IANA name (a leading `:`, as POSIX `TZ` allows, is ignored).
fn parse(name: &str) -> Option<Tz> {
    let name = name.trim();
    let name = name.strip_prefix(':').unwrap_or(name);
    name.parse().ok()
}

/// The zone `/etc/localtime` links to (`…/zoneinfo/Europe/Paris`).
fn localtime_link() -> Option<Tz> {
    let target = std::fs::read_link("/etc/localtime").ok()?;
    let text = target.to_string_lossy();
    let (_, name) = text.split_once("zoneinfo/")?;
    parse(name)
}

/// The timezone used when `[gateway] timezone` is absent, resolved once per process (see the
/// module docs).
pub(crate) fn system_default() -> Tz {
    static RESOLVED: OnceLock<Tz> = OnceLock::new();
    *RESOLVED.get_or_init(|| {
        if let Some(tz) = std::env::var("TZ").ok().as_deref().and_then(parse) {
            return tz;
        }
        let etc = std::fs::read_to_string("/etc/timezone").ok();
        if let Some(tz) = etc.as_deref().and_then(parse).or_else(localtime_link) {
            return tz;
        }
        tracing::warn!(
            "No timezone configured: [gateway] timezone is unset, TZ names no valid zone, and the system zone could not be read (/etc/timezone, /etc/localtime); cron schedules and heartbeats use UTC. Set [gateway] timezone = \"Area/City\" to choose."
        );
        chrono_tz::UTC
    })
}
