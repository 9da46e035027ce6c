//! The HTTP front's client sessions, by id. A session no request has used for the idle time is
//! forgotten, and at the cap the least recently used one goes; either way its downstream session
//! is closed (over stdio: its child process ends), so a client that never says DELETE costs the
//! gate nothing once it is idle. A session a request or a stream still holds is never idle.

use crate::relay::Session;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long sessions live and how many are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// A session unused this long is forgotten.
    pub idle: Duration,
    /// Most sessions kept at once.
    pub max: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            idle: Duration::from_secs(600),
            max: 10_000,
        }
    }
}

/// One client session: the version it agreed, its state, and the principal that opened it.
#[derive(Clone)]
pub(crate) struct ClientSession {
    pub version: crate::Version,
    pub state: Arc<Session>,
    pub principal: Option<String>,
}

struct Entry {
    session: ClientSession,
    last_used: Instant,
    /// Its place in `Table::by_use`.
    stamp: u64,
}

#[derive(Default)]
struct Table {
    by_id: HashMap<String, Entry>,
    /// Use stamps, oldest first -> session id: the least recently used session is the first.
    by_use: BTreeMap<u64, String>,
    next_stamp: u64,
}

impl Table {
    fn stamp(&mut self) -> u64 {
        self.next_stamp += 1;
        self.next_stamp
    }

    fn remove(&mut self, id: &str) -> Option<ClientSession> {
        let entry = self.by_id.remove(id)?;
        self.by_use.remove(&entry.stamp);
        Some(entry.session)
    }
}

/// The sessions of one HTTP front.
pub(crate) struct Sessions {
    limits: SessionLimits,
    table: Mutex<Table>,
}

/// Whether a request or a relayed stream holds the session now (the table holds one reference).
fn in_use(s: &ClientSession) -> bool {
    Arc::strong_count(&s.state) > 1
}

impl Sessions {
    pub(crate) fn new(limits: SessionLimits) -> Sessions {
        Sessions {
            limits,
            table: Mutex::new(Table::default()),
        }
    }

    /// The session `id`, marked used at `now`; `None` when it is unknown or was idle past the
    /// limit (then it is forgotten and its downstream closed).
    pub(crate) fn get(&self, id: &str, now: Instant) -> Option<ClientSession> {
        let mut table = self.table.lock().ok()?;
        let stamp = table.stamp();
        let entry = table.by_id.get_mut(id)?;
        let idle = now.saturating_duration_since(entry.last_used) >= self.limits.idle;
        if idle && !in_use(&entry.session) {
            let gone = table.remove(id);
            drop(table);
            close(gone);
            return None;
        }
        let old = std::mem::replace(&mut entry.stamp, stamp);
        entry.last_used = entry.last_used.max(now);
        let found = entry.session.clone();
        table.by_use.remove(&old);
        table.by_use.insert(stamp, id.to_string());
        Some(found)
    }

    /// Keep a new session under `id`; at the cap the least recently used one is forgotten first
    /// and its downstream closed.
    pub(crate) fn insert(&self, id: String, session: ClientSession, now: Instant) {
        let Ok(mut table) = self.table.lock() else {
            return;
        };
        let mut evicted = Vec::new();
        while table.by_id.len() >= self.limits.max.max(1) {
            let Some((_, oldest)) = table.by_use.pop_first() else {
                break;
            };
            if let Some(entry) = table.by_id.remove(&oldest) {
                evicted.push(entry.session);
            }
        }
        let stamp = table.stamp();
        table.by_use.insert(stamp, id.clone());
        let entry = Entry {
            session,
            last_used: now,
            stamp,
        };
        if let Some(replaced) = table.by_id.insert(id, entry) {
            table.by_use.remove(&replaced.stamp);
            evicted.push(replaced.session);
        }
        drop(table);
        for s in evicted {
            close(Some(s));
        }
    }

    /// Forget `id` (a DELETE); its downstream is closed.
    pub(crate) fn remove(&self, id: &str) -> bool {
        let gone = self.table.lock().ok().and_then(|mut t| t.remove(id));
        let found = gone.is_some();
        close(gone);
        found
    }

    /// Forget every session idle past the limit at `now` and close their downstreams; how many
    /// went.
    pub(crate) fn expire(&self, now: Instant) -> usize {
        let Ok(mut table) = self.table.lock() else {
            return 0;
        };
        let idle: Vec<String> = table
            .by_id
            .iter()
            .filter(|(_, e)| {
                now.saturating_duration_since(e.last_used) >= self.limits.idle
                    && !in_use(&e.session)
            })
            .map(|(id, _)| id.clone())
            .collect();
        let gone: Vec<ClientSession> = idle.iter().filter_map(|id| table.remove(id)).collect();
        drop(table);
        let n = gone.len();
        for s in gone {
            close(Some(s));
        }
        n
    }

    /// How many sessions are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table.lock().map_or(0, |t| t.by_id.len())
    }
}

/// Close a forgotten session's downstream session, in the background.
fn close(session: Option<ClientSession>) {
    let downstream = session.and_then(|s| s.state.downstream().cloned());
    if let Some(d) = downstream {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { d.close().await });
        }
    }
}

/// Expire idle sessions every so often, for as long as `sessions` is alive.
pub(crate) fn sweep(sessions: std::sync::Weak<Sessions>) {
    let Some(every) = sessions
        .upgrade()
        .map(|s| (s.limits.idle / 4).max(MIN_SWEEP))
    else {
        return;
    };
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(s) = sessions.upgrade() else { return };
            s.expire(Instant::now());
        }
    });
}

/// The sweeper wakes at most this often.
const MIN_SWEEP: Duration = Duration::from_millis(250);

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> ClientSession {
        ClientSession {
            version: crate::Version::new(2025, 11, 25),
            state: Session::new(None),
            principal: None,
        }
    }

    fn limits(idle_s: u64, max: usize) -> SessionLimits {
        SessionLimits {
            idle: Duration::from_secs(idle_s),
            max,
        }
    }

    #[test]
    fn at_the_cap_the_least_recently_used_session_goes() {
        let t0 = Instant::now();
        let s = Sessions::new(limits(600, 3));
        for id in ["a", "b", "c"] {
            s.insert(id.into(), session(), t0);
        }
        // `a` is used again, so `b` is now the least recently used.
        assert!(s.get("a", t0).is_some());
        s.insert("d".into(), session(), t0);
        assert_eq!(s.len(), 3);
        assert!(s.get("b", t0).is_none(), "the least recently used went");
        for id in ["a", "c", "d"] {
            assert!(s.get(id, t0).is_some(), "{id} was kept");
        }
        // Now `a` is the oldest use: it goes next.
        s.insert("e".into(), session(), t0);
        assert!(s.get("a", t0).is_none());
        assert!(s.get("c", t0).is_some() && s.get("e", t0).is_some());
    }

    #[test]
    fn an_idle_session_is_forgotten_unless_something_holds_it() {
        let t0 = Instant::now();
        let s = Sessions::new(limits(60, 100));
        s.insert("used".into(), session(), t0);
        s.insert("idle".into(), session(), t0);
        s.insert("held".into(), session(), t0);
        let later = t0 + Duration::from_secs(45);
        assert!(s.get("used", later).is_some());
        // A request (or a relayed stream) still holds `held`.
        let holder = s.get("held", t0).map(|c| c.state);
        let past = t0 + Duration::from_secs(61);
        assert_eq!(s.expire(past), 1, "only the idle, unheld session went");
        assert!(s.get("idle", past).is_none());
        assert!(s.get("used", past).is_some(), "used 16 s ago");
        assert!(s.get("held", past).is_some(), "held by a request");
        drop(holder);
        // Found idle on access too, without a sweep.
        let much_later = past + Duration::from_secs(61);
        assert!(s.get("used", much_later).is_none());
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn a_deleted_session_is_unknown() {
        let t0 = Instant::now();
        let s = Sessions::new(limits(60, 100));
        s.insert("x".into(), session(), t0);
        assert!(s.remove("x"));
        assert!(!s.remove("x"));
        assert!(s.get("x", t0).is_none());
    }
}
