//! Locks whose poisoning loses nothing.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Lock `m`, also after a thread panicked while holding it. Every critical section behind these
/// locks is one push, insert, remove or read of a collection, which a panic cannot leave half
/// done: the data are whole and are kept. (Skipping the work on a poisoned lock, as this code
/// once did, dropped report records and witness events without a word: a verdict on missing
/// evidence. The panic itself is reported where it happened and fails its trial.)
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
