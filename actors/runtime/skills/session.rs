//! Holding snapshots: [`SkillSession`] for one session, [`AgentSkills`] for every session of an
//! agent (what a prompt assembler keyed by session key wants).

use super::{SkillCatalog, SkillSnapshot};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Sessions remembered by [`AgentSkills`]; past this the map is cleared (each session then gets
/// the agent's current snapshot, which is what a fresh one would be anyway).
const MAX_SESSIONS: usize = 4096;

/// One session's skills, shareable across threads: the catalog and its current snapshot.
///
/// Call `SkillSession::refresh_if_changed` at the start of each turn (or before each model
/// call) and render [`SkillSession::snapshot`].
#[derive(Debug)]
pub struct SkillSession {
    catalog: SkillCatalog,
    current: Mutex<Arc<SkillSnapshot>>,
}

impl SkillSession {
    /// Takes the session's first snapshot.
    pub fn start(catalog: SkillCatalog) -> Self {
        let snapshot = Arc::new(SkillSnapshot::build(&catalog));
        Self {
            catalog,
            current: Mutex::new(snapshot),
        }
    }

    /// The catalog the snapshots come from.
    pub fn catalog(&self) -> &SkillCatalog {
        &self.catalog
    }

    /// The current snapshot (cheap: shared).
    pub fn snapshot(&self) -> Arc<SkillSnapshot> {
        Arc::clone(&lock(&self.current))
    }

    #[cfg(test)]
    /// Rebuilds the snapshot when a skill file changed since it was taken; true when it did.
    pub(crate) fn refresh_if_changed(&self) -> bool {
        let mut current = lock(&self.current);
        if !current.is_stale(&self.catalog) {
            return false;
        }
        *current = Arc::new(SkillSnapshot::build(&self.catalog));
        true
    }
}

/// Every session of one agent: each session key keeps the snapshot it was given until a skill
/// file changes; sessions share one snapshot while nothing changes.
#[derive(Debug)]
pub struct AgentSkills {
    catalog: SkillCatalog,
    /// The newest snapshot, handed to new and refreshed sessions.
    latest: Mutex<Arc<SkillSnapshot>>,
    sessions: Mutex<HashMap<String, Arc<SkillSnapshot>>>,
}

impl AgentSkills {
    /// Takes the agent's first snapshot (copying outside skills into `<workspace>/.skills/`).
    pub fn new(catalog: SkillCatalog) -> Self {
        let latest = Arc::new(SkillSnapshot::build(&catalog));
        Self {
            catalog,
            latest: Mutex::new(latest),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The catalog the snapshots come from.
    pub fn catalog(&self) -> &SkillCatalog {
        &self.catalog
    }

    /// The snapshot of `session`, rebuilt first if a skill file changed since it was taken.
    /// Call it at turn start (calling it before every model call is fine: it costs a `stat` of
    /// each source folder, each `SKILL.md` and each entry of `.skills/`, nothing else).
    pub(crate) fn snapshot_for(&self, session: &str) -> Arc<SkillSnapshot> {
        let held = lock(&self.sessions).get(session).cloned();
        if let Some(snapshot) = held.filter(|s| !s.changed()) {
            return snapshot;
        }
        let fresh = {
            let mut latest = lock(&self.latest);
            if latest.changed() {
                *latest = Arc::new(SkillSnapshot::build(&self.catalog));
            }
            Arc::clone(&latest)
        };
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= MAX_SESSIONS {
            sessions.clear();
        }
        sessions.insert(session.to_string(), Arc::clone(&fresh));
        fresh
    }

    /// The `<available_skills>` XML of `session` (see [`AgentSkills::snapshot_for`]).
    pub(crate) fn xml_for(&self, session: &str) -> String {
        self.snapshot_for(session).render_xml()
    }

    #[cfg(test)]
    /// Forgets a finished session.
    pub(crate) fn end_session(&self, session: &str) {
        lock(&self.sessions).remove(session);
    }

    /// `requires.env` of every skill found: values to keep out of prompts and transcripts.
    pub fn required_env_names(&self) -> Vec<String> {
        lock(&self.latest).required_env_names()
    }
}

/// A panic elsewhere cannot leave a half-written `Arc` or map entry: the data is still good.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
