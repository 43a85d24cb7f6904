//! Locks per volume and snapshot id: an operation holds the ids it works on (a clone, its
//! source's too) for its whole duration, so calls on different volumes run side by side while
//! two calls on one volume (a retry racing the original) never interleave. All of an
//! operation's ids are taken at once, so two operations can never wait on each other.

use std::collections::HashSet;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The ids operations hold.
#[derive(Default)]
pub struct IdLocks {
    held: Mutex<HashSet<String>>,
    released: Condvar,
}

/// Held ids; released on drop.
pub struct IdGuard<'a> {
    locks: &'a IdLocks,
    ids: Vec<String>,
}

impl IdLocks {
    fn held(&self) -> MutexGuard<'_, HashSet<String>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until none of `ids` is held, then holds them all.
    pub fn lock(&self, ids: &[&str]) -> IdGuard<'_> {
        let mut held = self.held();
        while ids.iter().any(|id| held.contains(*id)) {
            held = self.released.wait(held).unwrap_or_else(|p| p.into_inner());
        }
        let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        held.extend(ids.iter().cloned());
        IdGuard { locks: self, ids }
    }
}

impl Drop for IdGuard<'_> {
    fn drop(&mut self) {
        let mut held = self.locks.held();
        for id in &self.ids {
            held.remove(id);
        }
        drop(held);
        self.locks.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn one_id_is_held_by_one_operation_at_a_time() {
        let locks = IdLocks::default();
        let inside = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for t in 0..4 {
                let (locks, inside) = (&locks, &inside);
                scope.spawn(move || {
                    for _ in 0..200 {
                        // Overlapping pairs: "a" with "b", "b" with "c", ...
                        let ids = [["a", "b"], ["b", "c"], ["c", "a"], ["a", "a"]][t];
                        let _guard = locks.lock(&ids);
                        if ids.contains(&"a") {
                            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                            inside.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        assert!(locks.held().is_empty());
    }
}
